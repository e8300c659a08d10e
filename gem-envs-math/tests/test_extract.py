from __future__ import annotations

import pytest

from gem.parsing import answer_tag
from gem_envs_math.extract import extract_final_answer, gsm8k_answer, last_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{3}", "3"),
        (r"first \boxed{1} then \boxed{2}", "2"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces are literal, not groups
        (r"\boxed{\boxed{7}}", r"\boxed{7}"),  # the box that closes last
        (r"\boxed{4} and an unclosed \boxed{5", "4"),
        (r"\fbox{9}", "9"),
        (r"\boxed {x^{2}}", "x^{2}"),
        (r"so it is \boxed 5.", "5."),
        (r"\boxed{a}\\ \boxed{b}", "b"),  # a LaTeX line break is not an escaped brace
        ("no box here", None),
        (r"\boxed{", None),
        ("", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_gsm8k_and_answer_tags() -> None:
    assert gsm8k_answer("She makes 9 * 2 = 18 dollars.\n#### 18") == "18"
    assert gsm8k_answer("#### 1 \n#### 2,000\n") == "2,000"
    assert gsm8k_answer("####") is None
    assert answer_tag("<answer> 42 </answer>") == "42"
    assert answer_tag("<answer>1</answer> <answer>2</answer>") == "2"
    assert answer_tag("<answer>" * 100) is None


def test_extract_final_answer_prefers_the_box() -> None:
    assert extract_final_answer("#### 3\n\\boxed{4}") == "4"
    assert extract_final_answer("#### 3") == "3"
    assert extract_final_answer("<answer>5</answer>") == "5"
    assert extract_final_answer(r"\boxed{ }") is None
    assert extract_final_answer(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 200_000,
        "{" * 1_000_000,
        "}" * 1_000_000,
        "\\boxed{" + "{" * 300_000 + "1" + "}" * 300_000 + "}",
        "\\" * 1_000_000,
        "\\boxed " + " " * 1_000_000,
        "#" * 1_000_000,
    ],
)
def test_extraction_is_linear_on_hostile_text(text: str) -> None:
    # megabytes of nesting: a recursive or backtracking extractor would blow the stack
    # or hang here; a linear scan returns
    result = extract_final_answer(text)
    assert result is None or isinstance(result, str)


def test_megabyte_response_with_a_final_box() -> None:
    assert extract_final_answer("x" * 1_000_000 + r"\boxed{17}") == "17"
