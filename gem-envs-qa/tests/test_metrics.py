"""Normalisation, exact match and F1 on tricky answers."""

from __future__ import annotations

import random
import re
import string

import pytest

from gem_envs_qa.metrics import contains_answer, exact_match, f1_score, normalize_answer


def squad_normalize(s: str) -> str:
    """The SQuAD v1.1 evaluation script's normalisation, as the oracle for ASCII text."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def test_agrees_with_the_squad_script_on_ascii() -> None:
    rng = random.Random(0)
    alphabet = string.ascii_letters + string.digits + string.punctuation + "  \t\n"
    words = ["a", "an", "the", "The", "A", "theory", "another", "and"]
    for _ in range(3000):
        pieces = [rng.choice(words) if rng.random() < 0.3 else "".join(rng.choices(alphabet, k=rng.randint(0, 6)))
                  for _ in range(rng.randint(0, 6))]  # fmt: skip
        text = rng.choice(["", " ", "-", ".", "'"]).join(pieces)
        assert normalize_answer(text) == squad_normalize(text), repr(text)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        # articles, anywhere, in any case, but not inside words
        ("The Beatles", "Beatles", True),
        ("beatles, the", "The Beatles", True),
        ("A Tale of Two Cities", "Tale of Two Cities", True),
        ("Anthem", "them", False),
        ("theatre", "atre", False),
        # punctuation, ASCII and typographic
        ("Sunset Blvd.", "Sunset Blvd", True),
        ("“Hey Jude”", '"Hey Jude"', True),
        ("rock–paper—scissors", "rockpaperscissors", True),
        ("O'Neill", "ONeill", True),
        ("¿Qué?", "que", True),
        # numbers: separators are punctuation, words are not numbers
        ("1,000", "1000", True),
        ("1 000", "1000", False),
        ("one thousand", "1000", False),
        ("3.14", "314", True),
        ("１９６９", "1969", True),  # full-width digits
        ("-5", "5", True),  # the minus sign is punctuation to SQuAD too
        # unicode: accents, ligatures, case folding
        ("Beyoncé", "Beyonce", True),
        ("Zoë Saldaña", "zoe saldana", True),
        ("ﬁnance", "finance", True),
        ("Ærø", "aerø", False),  # Æ is a letter of its own, not A + E
        ("東京", "東京", True),
        ("Москва", "москва", True),
        # whitespace and emptiness
        ("  New\n\tYork  ", "new york", True),
        # an empty normalised prediction never matches, whatever the gold
        ("", "", False),
        ("the", "", False),
        ("Paris", "", False),
    ],
)
def test_exact_match(prediction: str, gold: str, expected: bool) -> None:
    assert exact_match(prediction, gold) is expected


def test_any_alias_matches() -> None:
    aliases = ["Sunset Boulevard", "Sunset Blvd", "West Sunset Boulevard"]
    assert exact_match("sunset blvd.", aliases)
    assert not exact_match("Sunset", aliases)
    assert not exact_match("anything", [])


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("Barack Obama", ["Obama"], 2 / 3),
        ("the cat sat", ["a cat sat down"], 0.8),
        ("Paris", ["London", "Paris, France"], 2 / 3),  # the best alias counts
        ("red red red", ["red"], 0.5),  # repeated tokens count once each side
        ("", [""], 0.0),  # an empty prediction scores 0 (SQuAD's script scores two empties 1)
        ("", ["Paris"], 0.0),
        ("The", ["a"], 0.0),  # both normalise to nothing: "a" is compared as itself
        ("Beyoncé Knowles", ["beyonce"], 2 / 3),
        ("completely wrong", ["Paris"], 0.0),
    ],
)
def test_f1(prediction: str, gold: list[str], expected: float) -> None:
    assert f1_score(prediction, gold) == pytest.approx(expected)


def test_exact_match_implies_f1_of_one_and_f1_of_one_means_the_same_tokens() -> None:
    rng = random.Random(1)
    words = ["the", "red", "blue", "car", "a", "Car", "car.", "blue,"]
    for _ in range(500):
        p = " ".join(rng.choices(words, k=rng.randint(1, 4)))
        g = " ".join(rng.choices(words, k=rng.randint(1, 4)))
        if not normalize_answer(g):
            continue  # golds made only of articles are compared in their light form
        same_tokens = sorted(normalize_answer(p).split()) == sorted(normalize_answer(g).split())
        assert (f1_score(p, [g]) == 1.0) == same_tokens, (p, g)
        if exact_match(p, [g]):
            assert f1_score(p, [g]) == 1.0


def test_contains_answer_respects_token_boundaries() -> None:
    assert contains_answer("It was built in 1889 by Gustave Eiffel.", ["1889"])
    assert contains_answer("THE EIFFEL TOWER, Paris", ["Eiffel Tower"])
    assert not contains_answer("It was built in 18890.", ["1889"])
    assert not contains_answer("anything", ["the"])  # an alias that normalises to nothing never matches
    assert contains_answer("Zoë Saldaña starred", ["Zoe Saldana"])
