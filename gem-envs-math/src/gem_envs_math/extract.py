"""Find the final answer in a model's response: the last ``\\boxed{}``, GSM8K's ``#### N``,
or an ``<answer>`` tag.

The box and tag readers are :mod:`gem.parsing`'s; math reads boxes as LaTeX. Everything
here runs in the caller's process on untrusted text, so each reader is a single linear
pass with no recursion and no backtracking regex: a megabyte of nested braces costs a few
milliseconds, never a hang.
"""

from __future__ import annotations

import re

from gem.parsing import answer_tag
from gem.parsing import last_boxed as _last_boxed

_GSM8K = re.compile(r"####[ \t]*([^\n]*)")


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (or ``\\fbox{...}``, or a bare
    ``\\boxed 5``) read as LaTeX, as written: :func:`gem.parsing.last_boxed` with
    ``latex``, ``fbox`` and ``bare`` on and ``strip`` off.

    "Last" is the box that closes last, so ``\\boxed{\\boxed{1}}`` yields ``\\boxed{1}``
    and an unclosed trailing ``\\boxed{`` falls back to the previous complete box.

    >>> last_boxed(r"so $x=\\boxed{\\frac{1}{2}}$, or \\boxed{3}")
    '3'
    >>> last_boxed(r"\\boxed{\\{1, 2\\}}")
    '\\\\{1, 2\\\\}'
    """
    return _last_boxed(text, strip=False, latex=True, fbox=True, bare=True)


def gsm8k_answer(text: str) -> str | None:
    """The text after the last ``####`` marker (GSM8K's answer line), or ``None``.

    >>> gsm8k_answer("She makes 9 * 2 = 18 dollars.\\n#### 18")
    '18'
    """
    position = text.rfind("####")
    if position < 0:
        return None
    match = _GSM8K.match(text, position)
    answer = match.group(1).strip() if match else ""
    return answer or None


def extract_final_answer(text: str) -> str | None:
    """The response's final answer, or ``None`` when it states none (a format error).

    Tries, in order: the last ``\\boxed{}``, GSM8K's ``#### N``, an ``<answer>`` tag.

    >>> extract_final_answer(r"The area is $\\boxed{2\\sqrt{2}}$.")
    '2\\\\sqrt{2}'
    >>> extract_final_answer("I think it is 5") is None
    True
    """
    if not isinstance(text, str):
        return None
    for extractor in (last_boxed, gsm8k_answer, answer_tag):
        answer = extractor(text)
        if answer is not None and answer.strip():
            return answer.strip()
    return None
