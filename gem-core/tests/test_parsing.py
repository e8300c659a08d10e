"""Answer extraction from responses, including hostile ones."""

from __future__ import annotations

import pytest

from gem.parsing import answer_tag, last_boxed, last_code_block


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


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        (r"\boxed{\boxed{7}}", {}, "7"),  # the last box that opens
        (r"\boxed{\boxed{7}}", {"latex": True}, r"\boxed{7}"),  # the box that closes last
        (r"\boxed{\{1, 2\}}", {"latex": True}, r"\{1, 2\}"),  # escaped braces are characters
        (r"\boxed {x^{2}}", {"latex": True}, "x^{2}"),
        (r"\boxed {x^{2}}", {}, None),
        (r"\fbox{9}", {}, None),
        (r"\fbox{9}", {"fbox": True}, "9"),
        (r"\boxed{1} \fbox{9}", {"fbox": True, "latex": True}, "9"),
        (r"so it is \boxed 5.", {}, None),
        (r"so it is \boxed 5.", {"bare": True}, "5."),
        (r"\boxed{4} or \boxed 5", {"bare": True}, "4"),  # a braced box comes first
    ],
)
def test_last_boxed_options(text: str, options: dict, expected: str | None) -> None:
    assert last_boxed(text, **options) == expected


@pytest.mark.parametrize(
    ("text", "loose", "strict"),
    [
        ("```python\nprint(1)\n```", "print(1)", "print(1)"),
        ("```c++\nint x;\n```", "int x;", None),  # the reference's tag is one word
        ("```python \nprint(1)\n```", "print(1)", None),  # and the newline follows at once
        ("```\r\nx = 1\r\n```", "x = 1", None),
        ("```c++\nint x;\n```\nthen\n```", "int x;", "then"),  # its closing fence opens the next block
    ],
)
def test_last_code_block_strict_reads_fences_as_the_reference(text: str, loose: str | None, strict: str | None) -> None:
    assert (last_code_block(text), last_code_block(text, strict=True)) == (loose, strict)


@pytest.mark.parametrize("options", [{"latex": True, "fbox": True, "bare": True}, {"fbox": True, "bare": True}])
def test_hostile_inputs_stay_linear_with_every_option(options: dict) -> None:
    for text in ("\\fbox{" * 200_000, "\\boxed{" * 100_000 + "\\fbox{" * 100_000, "\\boxed " + " " * 1_000_000):
        assert last_boxed(text, **options) is None
    assert last_boxed("\\fbox{\\boxed{" * 100_000 + "x}", **options) == "x"
    assert last_code_block("```" * 100_000, strict=True) is None
