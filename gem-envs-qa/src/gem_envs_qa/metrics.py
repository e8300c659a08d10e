"""SQuAD-style answer normalisation, exact match and token-level F1.

The normalisation is the SQuAD evaluation script's (lower-case, drop punctuation, drop
the articles "a", "an", "the", collapse whitespace), which is also what the reference
package's ``em_check`` does, extended so that non-ASCII text behaves: Unicode
compatibility forms are folded (NFKC: full-width digits, ligatures), accents are dropped
("Beyoncé" matches "Beyonce"), and every Unicode punctuation mark counts as punctuation
(curly quotes, dashes, "¿"), not only ASCII's. On plain ASCII text the result is the
SQuAD script's, character for character.

Numbers are compared as text after that: "1,000" and "1000" match (the comma is
punctuation), "1000" and "one thousand" do not.

>>> normalize_answer("The  Beatles!")
'beatles'
>>> exact_match("the Eiffel Tower", ["Eiffel Tower", "La Tour Eiffel"])
True
>>> round(f1_score("Barack Obama", ["Obama"]), 3)
0.667
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _is_punctuation(char: str) -> bool:
    # SQuAD drops string.punctuation (ASCII punctuation and symbols such as $ + < = > ^ ` | ~);
    # Unicode punctuation (category P*) goes too, so typographic quotes and dashes vanish
    return unicodedata.category(char).startswith("P") or char in "$+<=>^`|~"


def normalize_answer(text: str) -> str:
    """Lower-case, strip accents and punctuation, drop articles, collapse whitespace.

    >>> normalize_answer("“Sunset Blvd.”")
    'sunset blvd'
    >>> normalize_answer("Señor   Frog’s")
    'senor frogs'
    """
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", str(text)).lower())
    text = "".join(c for c in text if not unicodedata.combining(c) and not _is_punctuation(c))
    return " ".join(_ARTICLES.sub(" ", text).split())


def _golds(gold: str | Iterable[str]) -> list[str]:
    return [gold] if isinstance(gold, str) else [str(g) for g in gold]


def exact_match(prediction: str, gold: str | Iterable[str]) -> bool:
    """Whether ``prediction`` equals any gold alias after :func:`normalize_answer`.

    >>> exact_match("  PARIS. ", "Paris")
    True
    """
    predicted = normalize_answer(prediction)
    return any(predicted == normalize_answer(g) for g in _golds(gold))


def _token_f1(predicted: list[str], gold: list[str]) -> float:
    common = Counter(predicted) & Counter(gold)
    overlap = sum(common.values())
    if not predicted or not gold:
        # SQuAD's convention: two empty answers agree, one empty answer scores 0
        return float(predicted == gold)
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, gold: str | Iterable[str]) -> float:
    """Token-level F1 between ``prediction`` and the best-matching gold alias.

    >>> f1_score("the cat sat", ["a cat sat down"])
    0.8
    """
    predicted = normalize_answer(prediction).split()
    return max((_token_f1(predicted, normalize_answer(g).split()) for g in _golds(gold)), default=0.0)


def contains_answer(text: str, gold: str | Iterable[str]) -> bool:
    """Whether some gold alias occurs in ``text`` as a whole-token run, after normalisation
    (used for retrieval recall and for multi-part answers).

    >>> contains_answer("He was born in Paris, France.", ["paris"])
    True
    >>> contains_answer("Parisian cafés", ["paris"])
    False
    """
    haystack = f" {normalize_answer(text)} "
    for g in _golds(gold):
        needle = normalize_answer(g)
        if needle and f" {needle} " in haystack:
            return True
    return False
