"""The equivalence table: what the grader must accept and what it must reject."""

from __future__ import annotations

import pytest

from gem_envs_math.verify import canonical_text, is_equivalent

# (model answer, reference)
EQUIVALENT = [
    ("0.5", r"\frac{1}{2}"),
    (r"\frac12", "1/2"),
    (r"\dfrac{3}{4}", "0.75"),
    ("50\\%", "0.5"),
    ("50\\%", "50"),
    ("18.00", "18"),
    ("1,000", "1000"),
    ("\\$18", "18"),
    (r"10\text{ cm}", "10"),
    (r"10^\circ", "10"),
    ("x=2", "2"),
    ("2", "x = 2"),
    (r"2\sqrt{2}", r"\sqrt{8}"),
    ("(x+1)^2", "x^2+2x+1"),
    (r"\{3, 2, 1\}", r"\{1,2,3\}"),
    ("2, 1", "1, 2"),
    ("[1,2)", "[1, 2)"),
    (r"(-\infty, 3)", r"(-\infty,3)"),
    (r"(3, \pi/2)", r"\left( 3, \frac{\pi}{2} \right)"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"),
    (r"\begin{pmatrix}1 & 0\\0 & 1\end{pmatrix}", r"\begin{pmatrix}1&0\\0&1\end{pmatrix}"),
    (r"\text{(C)}", "C"),
    ("-3", "-3.0"),
    (r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}"),
    ("3/6", r"\frac{1}{2}"),
    (r"\pi", r"\pi"),
    (r"\sqrt{4}", "2"),
]

NOT_EQUIVALENT = [
    ("3", "4"),
    ("0.33", r"\frac{1}{3}"),
    ("(2, 1)", "(1, 2)"),  # tuples are ordered
    ("[1, 2]", "[1, 2)"),  # closed vs half-open
    (r"\{1, 2\}", r"\{1, 2, 3\}"),
    ("x^2+1", "(x+1)^2"),
    ("-2", "2"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\begin{pmatrix}2\\1\end{pmatrix}"),
    ("1000", "100"),
    (r"\sqrt{2}", "1.41"),
    ("", "0"),
    (r"\frac{1}{", "1"),  # malformed LaTeX is wrong, never an error
    (r"\begin{pmatrix}", "1"),
    ("}}}{{{", "1"),
    (r"\left(", "1"),
]


@pytest.mark.parametrize(("answer", "reference"), EQUIVALENT)
def test_equivalent(answer: str, reference: str) -> None:
    assert is_equivalent(answer, reference)


@pytest.mark.parametrize(("answer", "reference"), NOT_EQUIVALENT)
def test_not_equivalent(answer: str, reference: str) -> None:
    assert not is_equivalent(answer, reference)


def test_canonical_text() -> None:
    assert canonical_text(r" \left( 1, 2 \right) ") == "(1,2)"
    assert canonical_text(r"\dfrac{1}{2}.") == r"\frac{1}{2}"
    assert canonical_text(r"\text{Monday}") == "Monday"
