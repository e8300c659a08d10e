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

#: directional and relational symbols: each pair means opposite things, so neither the
#: text shortcut (which drops ``\left``/``\right`` sizing) nor math-verify may merge them
OPPOSITES = [
    (r"\leftarrow", r"\rightarrow"),
    (r"A \rightarrow B", r"A \leftarrow B"),
    (r"A\leftarrow B", r"A\rightarrow B"),
    (r"\leftharpoonup", r"\rightharpoonup"),
    (r"\leftrightarrow", r"\rightarrow"),
    (r"\Leftarrow", r"\Rightarrow"),
    (r"p \Rightarrow q", r"p \Leftarrow q"),
    (r"\longleftarrow", r"\longrightarrow"),
    (r"\xleftarrow{}", r"\xrightarrow{}"),
    (r"\hookleftarrow", r"\hookrightarrow"),
    (r"\leftleftarrows", r"\rightrightarrows"),
    (r"\to", r"\gets"),
    (r"\uparrow", r"\downarrow"),
    (r"\nearrow", r"\searrow"),
    (r"x \leq 3", r"x \geq 3"),
    (r"x \le 3", r"x \ge 3"),
    (r"x < 3", r"x > 3"),
    (r"x \lt 3", r"x \gt 3"),
    (r"x \leqslant 3", r"x \geqslant 3"),
    (r"A \subset B", r"A \supset B"),
    (r"A \subseteq B", r"A \supseteq B"),
    (r"x \in A", r"x \notin A"),
    (r"x \ne 3", r"x = 3"),
    (r"a \ll b", r"a \gg b"),
    (r"a \prec b", r"a \succ b"),
    (r"A \to B", r"B \to A"),
]


@pytest.mark.parametrize(("answer", "reference"), EQUIVALENT)
def test_equivalent(answer: str, reference: str) -> None:
    assert is_equivalent(answer, reference)


@pytest.mark.parametrize(("answer", "reference"), NOT_EQUIVALENT)
def test_not_equivalent(answer: str, reference: str) -> None:
    assert not is_equivalent(answer, reference)


@pytest.mark.parametrize(("answer", "reference"), OPPOSITES)
def test_opposite_symbols_are_not_equivalent(answer: str, reference: str) -> None:
    assert not is_equivalent(answer, reference)
    assert not is_equivalent(reference, answer)
    assert is_equivalent(answer, answer)


def test_canonical_text_keeps_commands_apart() -> None:
    assert canonical_text(r"A \leftarrow B") == r"A\leftarrow B"
    assert canonical_text(r"\left\{ 1 \right\}") == r"\{1\}"
    assert canonical_text(r"\left .x\right|") == ".x|"


def test_canonical_text() -> None:
    assert canonical_text(r" \left( 1, 2 \right) ") == "(1,2)"
    assert canonical_text(r"\dfrac{1}{2}.") == r"\frac{1}{2}"
    assert canonical_text(r"\text{Monday}") == "Monday"
