"""Mathematical equivalence of two answer strings, with math-verify.

This module runs unsupervised: a hostile answer (``9^{9^{9^9}}``) can keep it busy
forever. Envs never call it directly; they go through :mod:`gem_envs_math.pool`, whose
worker processes import this module and are killed from outside when they overrun.
"""

from __future__ import annotations

import logging
import re

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

# math-verify warns once that its signal-based timeouts are off: they are off on purpose
# (signals only work in a main thread; the pool enforces time limits from outside)
logging.getLogger("math_verify").setLevel(logging.ERROR)

_EXTRACTION = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
#: a run of spaces, with the control word before it and the letter after it, if any: a
#: space that ends a control word before a letter (``\\to B``) is part of the text
_SPACES = re.compile(r"(\\[A-Za-z]+)?\s+(?=([A-Za-z])?)")
#: ``\\left``/``\\right`` as delimiter sizing only, never the start of a longer command
#: (``\\leftarrow``, ``\\rightarrow``, ``\\leftharpoonup`` keep their direction)
_SIZING = re.compile(r"\\(?:left|right)(?![A-Za-z])")
_TEXT_WRAPPER = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\{(.*)\}$")


def _space(match: re.Match) -> str:
    word, letter = match.groups()
    return (word + " ") if word and letter else (word or "")


def canonical_text(answer: str) -> str:
    """A string form for the exact-match shortcut: no spaces, no ``\\text{}``, no
    ``\\left``/``\\right`` sizing; commands and their direction are kept.

    >>> canonical_text(r" \\left( 1, 2 \\right) ")
    '(1,2)'
    >>> canonical_text(r"A \\leftarrow B") == canonical_text(r"A \\rightarrow B")
    False
    """
    text = _SPACES.sub(_space, answer)
    text = _SIZING.sub("", text).replace("\\!", "")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").rstrip(".")
    match = _TEXT_WRAPPER.match(text)
    return match.group(1) if match else text


def _parse(answer: str) -> list:
    # "first_match": the answer's own (rightmost, highest-priority) match is parsed or the
    # parse fails. math-verify's default tries the next matches when one fails, so an
    # answer whose LaTeX parse hits the recursion limit (``7+1+1+...``, 989 ones) fell back
    # to a fragment of it (the number 7) and was graded as that
    return parse(f"${answer}$", extraction_config=_EXTRACTION, parsing_timeout=None, extraction_mode="first_match")


def is_equivalent(answer: str, reference: str) -> bool:
    """Whether ``answer`` equals ``reference`` mathematically (both bare answers, no ``\\boxed``).

    Equal strings (after :func:`canonical_text`) are equivalent without parsing; otherwise
    both are parsed to sympy and compared as numbers, fractions, percentages, sets,
    intervals, tuples, matrices or expressions.

    >>> is_equivalent(r"\\frac{1}{2}", "0.5")
    True
    >>> is_equivalent("(1, 2)", "(2, 1)")
    False
    """
    return canonical_text(answer) == canonical_text(reference) or sympy_equivalent(answer, reference)


def sympy_equivalent(answer: str, reference: str) -> bool:
    """The math-verify half of :func:`is_equivalent`: parse both and compare, with no
    string shortcut (so it also tells whether a reference parses as itself).

    >>> sympy_equivalent("2, 1", "1, 2")
    True
    """
    try:
        gold = _parse(reference)
        pred = _parse(answer)
        return bool(gold and pred and verify(gold, pred, timeout_seconds=None))
    except Exception:  # any failure to parse or compare means "not shown equal"
        return False


#: one comparison of each kind math-verify handles (numbers, roots, polynomials, sets,
#: intervals, matrices, percentages, equations, units, text): see :func:`warm_up`
_WARM_UP = (
    ("1", "1.0"),
    (r"\frac{1}{2}", "0.5"),
    (r"2\sqrt{2}", r"\sqrt{8}"),
    ("(x+1)^2", "x^2+2x+1"),
    (r"\{3, 2, 1\}", r"\{1,2,3\}"),
    ("[1,2)", "[1, 2)"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"),
    ("50\\%", "0.5"),
    ("x=2", "2"),
    (r"10^\circ", "10"),
    (r"\text{(C)}", "C"),
    (r"(3, \pi/2)", r"\left( 3, \frac{\pi}{2} \right)"),
)


def warm_up() -> None:
    """Run one comparison of each kind, so that math-verify's and sympy's lazy set-up
    (parser tables, caches, the first use of each sympy module) is done. The grading
    pool's fork server calls it once; every worker forked from it starts warm (cold, the
    first root, polynomial or set comparison in a process costs 0.1-0.8 s)."""
    for answer, reference in _WARM_UP:
        sympy_equivalent(answer, reference)
