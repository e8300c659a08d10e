"""Answer extraction from responses, including hostile ones."""

from __future__ import annotations

import pytest

from gem.parsing import answer_tag, last_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>Paris</answer>", "Paris"),
        ("<think>maybe <answer>Rome</answer>?</think> <answer> Paris </answer>", "Paris"),
        ("<answer>a</answer><answer>b", "a"),  # the last *complete* tag
        ("<answer>a</answer> no, </answer>", "a"),  # up to the first close after it
        ("<answer></answer>", ""),
        ("<answer>multi\nline</answer>", "multi\nline"),
        ("<answer>unclosed", None),
        ("</answer> only a close", None),
        ("no tags at all", None),
        ("<answer>" * 100, None),
    ],
)
def test_answer_tag(text: str, expected: str | None) -> None:
    assert answer_tag(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{Paris}", "Paris"),
        (r"\boxed{1} then \boxed{2}", "2"),
        (r"\boxed{\text{New York}}", r"\text{New York}"),
        (r"\boxed{ {a} b }", "{a} b"),
        (r"\boxed{1} and an unclosed \boxed{2", "1"),
        (r"\boxed{}", ""),
        (r"\boxed", None),
        ("plain", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_hostile_inputs_stay_linear() -> None:
    # these would take minutes with a quadratic scan; a linear one takes milliseconds
    assert last_boxed("\\boxed{" * 200_000) is None
    assert last_boxed("\\boxed{" * 200_000 + "x}") == "x"
    assert answer_tag("<answer>" * 200_000 + "</answer>" * 3) == ""
    assert answer_tag("</answer>" * 200_000) is None


def test_unstripped_boxes_and_non_strings() -> None:
    assert last_boxed(r"I guess \boxed{5} ... no, \boxed{ {7} }", strip=False) == " {7} "
    assert last_boxed(None) is None and answer_tag(42) is None
