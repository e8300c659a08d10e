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

Where SQuAD's script is exploitable, ours differs:

- an empty normalised prediction never matches (SQuAD counts two empty strings as
  equal, so gold answers made only of punctuation or articles, such as ``+-*/``,
  ``---``, ``)`` or ``A+``, were matched by an empty answer). Such golds are compared
  in a light form instead: Unicode-folded, lower-cased, whitespace collapsed, punctuation
  kept, so ``A+`` matches "a+" but not "" or "A";
- a prediction much longer than every gold alias (more than :func:`length_limit`
  characters) is wrong without being normalised, which also bounds the cost of
  scoring an 8 MB answer.

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
from collections.abc import Iterable, Sequence

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


def _light(text: str) -> str:
    """The form of a gold answer that SQuAD's normalisation would empty."""
    return " ".join(unicodedata.normalize("NFKC", str(text)).lower().split())


def _forms(gold: str) -> tuple[str, bool]:
    """``(form, light)``: the gold's SQuAD form, or its light form when that is empty."""
    full = normalize_answer(gold)
    return (full, False) if full else (_light(gold), True)


#: characters a prediction may have beyond four times its longest gold alias
EXTRA_CHARS = 200


#: tokens a multi-part prediction may have beyond twice the parts' tokens
EXTRA_TOKENS = 10


def length_limit(gold: str | Iterable[str]) -> int:
    """The longest prediction (characters) scored against ``gold``: four times its
    longest alias plus :data:`EXTRA_CHARS`."""
    return 4 * max((len(g) for g in _golds(gold)), default=0) + EXTRA_CHARS


def exact_match(prediction: str, gold: str | Iterable[str]) -> bool:
    """Whether ``prediction`` equals any gold alias after :func:`normalize_answer`.

    >>> exact_match("  PARIS. ", "Paris")
    True
    >>> exact_match("", ["+-*/"]), exact_match("+-*/", ["+-*/"])
    (False, True)
    """
    golds = _golds(gold)
    if len(prediction) > length_limit(golds):
        return False
    predicted, light = normalize_answer(prediction), None
    for g in golds:
        form, is_light = _forms(g)
        if not form:
            continue
        if is_light:
            light = _light(prediction) if light is None else light
            if light == form:
                return True
        elif predicted == form:
            return True
    return False


def _token_f1(predicted: list[str], gold: list[str]) -> float:
    # an empty prediction or gold scores 0 (SQuAD's script scores two empties 1)
    overlap = sum((Counter(predicted) & Counter(gold)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, gold: str | Iterable[str]) -> float:
    """Token-level F1 between ``prediction`` and the best-matching gold alias.

    >>> f1_score("the cat sat", ["a cat sat down"])
    0.8
    """
    golds = _golds(gold)
    if len(prediction) > length_limit(golds):
        return 0.0
    predicted, light = normalize_answer(prediction).split(), _light(prediction).split()
    best = 0.0
    for g in golds:
        form, is_light = _forms(g)
        best = max(best, _token_f1(light if is_light else predicted, form.split()))
    return best


def contains_answer(text: str, gold: str | Iterable[str]) -> bool:
    """Whether some gold alias occurs in ``text`` as a whole-token run, after normalisation
    (used for retrieval recall and for multi-part answers).

    >>> contains_answer("He was born in Paris, France.", ["paris"])
    True
    >>> contains_answer("Parisian cafés", ["paris"])
    False
    """
    haystack, light = f" {normalize_answer(text)} ", None
    for g in _golds(gold):
        needle, is_light = _forms(g)
        if not needle:
            continue
        if is_light:
            light = f" {_light(text)} " if light is None else light
            if f" {needle} " in light:
                return True
        elif f" {needle} " in haystack:
            return True
    return False


def parts_stated(prediction: str, parts: Sequence[str | Iterable[str]]) -> list[bool]:
    """For a multi-part answer, which ``parts`` (each a gold string or a list of aliases)
    ``prediction`` states. Listing candidates does not pay: a prediction longer than
    :func:`length_limit` of all parts joined, or with more than twice their tokens plus
    :data:`EXTRA_TOKENS`, states none.

    >>> parts_stated("Right and Left", ["Right", "Left"])
    [True, True]
    >>> parts_stated("right left " + " ".join(map(str, range(100))), ["Right", "Left"])
    [False, False]
    """
    joined = ", ".join(g for part in parts for g in _golds(part)[:1])
    gold_tokens = sum(len(_forms(g)[0].split()) for part in parts for g in _golds(part)[:1])
    too_long = len(prediction) > length_limit(joined)
    if too_long or len(normalize_answer(prediction).split()) > 2 * gold_tokens + EXTRA_TOKENS:
        return [False] * len(parts)
    return [contains_answer(prediction, part) for part in parts]
