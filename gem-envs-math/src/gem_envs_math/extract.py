"""Find the final answer in a model's response: the last ``\\boxed{}``, GSM8K's ``#### N``,
or an ``<answer>`` tag.

Every function here runs in the caller's process on untrusted text, so each is a single
linear pass with no recursion and no backtracking regex: a megabyte of nested braces
costs a few milliseconds, never a hang.
"""

from __future__ import annotations

import re

# one token per match: an escaped backslash, an escaped brace (literal, never a group),
# the opening of a box, or a plain brace
_BRACE_TOKENS = re.compile(r"\\\\|\\[{}]|\\(?:boxed|fbox)\s*\{|[{}]")
_BARE_BOX = re.compile(r"\\boxed +([^\s$]+)")
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_TAG_OPEN = "<answer>"
_ANSWER_TAG_CLOSE = "</answer>"


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced.

    "Last" is the box that closes last, so ``\\boxed{\\boxed{1}}`` yields ``\\boxed{1}``
    and an unclosed trailing ``\\boxed{`` falls back to the previous complete box.

    >>> last_boxed(r"so $x=\\boxed{\\frac{1}{2}}$, or \\boxed{3}")
    '3'
    >>> last_boxed(r"\\boxed{\\{1, 2\\}}")
    '\\\\{1, 2\\\\}'
    """
    # stack entries: content start offset for a box, -1 for an ordinary group
    stack: list[int] = []
    found: tuple[int, int] | None = None
    for match in _BRACE_TOKENS.finditer(text):
        token = match.group()
        if token == "}":
            if stack:
                start = stack.pop()
                if start >= 0:
                    found = (start, match.start())
        elif token == "{":
            stack.append(-1)
        elif token[-1] == "{" and token[1] in "bf":
            stack.append(match.end())
    if found is not None:
        return text[found[0] : found[1]]
    bare = [m.group(1) for m in _BARE_BOX.finditer(text)]
    return bare[-1] if bare else None


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


def answer_tag(text: str) -> str | None:
    """Content of the last complete ``<answer>...</answer>``, or ``None``.

    >>> answer_tag("<answer>42</answer>")
    '42'
    """
    end = text.rfind(_ANSWER_TAG_CLOSE)
    if end < 0:
        return None
    start = text.rfind(_ANSWER_TAG_OPEN, 0, end)
    if start < 0:
        return None
    return text[start + len(_ANSWER_TAG_OPEN) : end].strip() or None


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
