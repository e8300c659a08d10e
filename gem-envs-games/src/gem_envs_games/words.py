"""Offline word lists and crossword clues for the word games.

Everything comes from packages installed with this one, never from the network:

- frequency ranks from ``wordfreq`` (``top_n_list("en", ...)``), so secret words are
  words people actually use;
- spelling from ``english-words`` (the ``web2`` and ``gcide`` lists), so a frequent
  token must also be a dictionary word (no names, brands or typos) to be a secret;
- crossword clues from ``data/crossword_clues.json``, built from the MIT-licensed clue
  sets of the ``xpuz`` package by ``scripts/build_crossword_clues.py``.

Lists are built on first use (about half a second) and cached per process.

>>> "crane" in secret_words(5)
True
>>> is_real_word("crane") and not is_real_word("xqzvt")
True
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from importlib import resources

#: the most frequent words that secrets are drawn from (normal / hardcore games)
COMMON_RANK = 10_000
HARDCORE_RANK = 50_000
#: word search: easy words are among the most frequent, hard ones come from further down
WORD_SEARCH_EASY_RANK = 5_000

# Secrets are shown to people and fed to models as targets; these are common enough
# to pass the frequency filter but not wanted as the answer of a game.
_NOT_SECRETS = frozenset(
    "anal anus arse ass bastard bitch boob boobs cock crap cunt damn dick dildo dyke fag faggot fuck "
    "homo horny jerk kike naked nigga nigger nude orgasm penis piss porn pussy rape retard semen sex "
    "sexy shit slave slut sperm spic tits twat vagina wank whore chink".split()
)


@lru_cache(maxsize=1)
def _dictionary_words() -> frozenset[str]:
    """Lower-case dictionary words (proper nouns excluded: web2 keeps their capitals)."""
    from english_words import get_english_words_set

    web2 = get_english_words_set(["web2"], lower=False, alpha=True)
    gcide = get_english_words_set(["gcide"], lower=False, alpha=True)
    return frozenset(w for w in web2 | gcide if w.isascii() and w.islower())


@lru_cache(maxsize=1)
def _ranked_words() -> tuple[str, ...]:
    """Alphabetic ASCII words by descending frequency (wordfreq's top 50k)."""
    from wordfreq import top_n_list

    return tuple(w for w in top_n_list("en", HARDCORE_RANK) if w.isascii() and w.isalpha())


@cache
def _secrets(length: int, first_rank: int, last_rank: int) -> tuple[str, ...]:
    dictionary = _dictionary_words()
    ranked = _ranked_words()[first_rank:last_rank]
    return tuple(w for w in ranked if len(w) == length and w in dictionary and w not in _NOT_SECRETS)


def secret_words(length: int, hardcore: bool = False) -> tuple[str, ...]:
    """Common lower-case dictionary words of ``length`` letters, most frequent first.

    ``hardcore`` widens the pool from the top 10k to the top 50k words.

    >>> secret_words(3)[:3]
    ('the', 'and', 'for')
    """
    return _secrets(length, 0, HARDCORE_RANK if hardcore else COMMON_RANK)


def word_search_words(hardcore: bool = False) -> tuple[str, ...]:
    """Words hidden in word-search grids: 4-7 letters among the 5k most frequent words,
    or (hardcore) 5-9 letters from ranks 5k-50k."""
    if hardcore:
        return tuple(w for n in range(5, 10) for w in _secrets(n, WORD_SEARCH_EASY_RANK, HARDCORE_RANK))
    return tuple(w for n in range(4, 8) for w in _secrets(n, 0, WORD_SEARCH_EASY_RANK))


@cache
def guess_words(length: int) -> frozenset[str]:
    """Every word accepted as a guess of ``length`` letters: dictionary words plus the
    frequent words the dictionary lacks (plurals, past tenses, newer words)."""
    ranked = (w for w in _ranked_words() if len(w) == length)
    return frozenset(w for w in _dictionary_words() if len(w) == length).union(ranked)


def is_real_word(word: str) -> bool:
    """Whether ``word`` (any case) is an accepted English word."""
    return word.isascii() and word.isalpha() and word.lower() in guess_words(len(word))


@lru_cache(maxsize=2)
def crossword_clues(hardcore: bool = False) -> tuple[tuple[str, str], ...]:
    """``(ANSWER, clue)`` pairs; within one answer length every clue is distinct.

    >>> ("PARIS", "The capital of France") in crossword_clues()
    True
    """
    text = resources.files("gem_envs_games").joinpath("data", "crossword_clues.json").read_text("utf-8")
    pairs = json.loads(text)["hard" if hardcore else "easy"]
    return tuple((word, clue) for word, clue in pairs)
