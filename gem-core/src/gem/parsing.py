"""Read an answer out of a response: the last ``<answer>…</answer>``, the last
``\\boxed{…}`` or the last fenced code block.

Every suite that reads answers, moves or programs from free text uses these, with named
options where a suite reads differently (math reads boxes as LaTeX). All run in one
linear pass over untrusted text (``str.rfind``, a brace counter, regexes without nested
repetition), so a megabyte of unclosed tags costs milliseconds.
"""

from __future__ import annotations

import re

_OPEN, _CLOSE = "<answer>", "</answer>"
_BOX, _FBOX = "\\boxed{", "\\fbox{"
# LaTeX reading, one token a match: an escaped backslash, an escaped brace (a literal, not
# a group), the opening of a box (spaces allowed before its brace), a plain brace
_LATEX_TOKENS = re.compile(r"\\\\|\\[{}]|\\boxed\s*\{|[{}]")
_LATEX_TOKENS_FBOX = re.compile(r"\\\\|\\[{}]|\\(?:boxed|fbox)\s*\{|[{}]")
_BARE_BOX = re.compile(r"\\boxed +([^\s$]+)")


def answer_tag(text: object) -> str | None:
    """Content of the last complete ``<answer>…</answer>``, stripped; ``None`` if there is
    none. An empty tag gives ``""`` (an answer, just a wrong one). The answer runs from the
    last opening tag that is closed to the first closing tag after it.

    >>> answer_tag("<think>hmm</think> <answer> Paris </answer>")
    'Paris'
    >>> answer_tag("<answer>Rome</answer> on second thought </answer>")
    'Rome'
    >>> answer_tag("<answer>unclosed") is None
    True
    """
    if not isinstance(text, str):
        return None
    last_close = text.rfind(_CLOSE)
    if last_close < 0:
        return None
    start = text.rfind(_OPEN, 0, last_close)
    if start < 0:
        return None
    start += len(_OPEN)
    return text[start : text.find(_CLOSE, start)].strip()


def last_boxed(
    text: object, strip: bool = True, *, latex: bool = False, fbox: bool = False, bare: bool = False
) -> str | None:
    """Content of the last ``\\boxed{…}`` whose braces balance (stripped unless
    ``strip=False``); ``None`` if there is none.

    Options for readers of LaTeX (the math suite uses all three):

    - ``latex=True``: ``\\{``, ``\\}`` and ``\\\\`` are characters, not groups; spaces may
      come between ``\\boxed`` and its brace; of nested boxes the outer one (the box that
      closes last) is the answer.
    - ``fbox=True``: ``\\fbox{…}`` is a box too.
    - ``bare=True``: with no braced box, the last ``\\boxed 5`` (one word after
      ``\\boxed`` and a space) is the answer.

    >>> last_boxed(r"first \\boxed{1}, then \\boxed{{a} b}")
    '{a} b'
    >>> last_boxed(r"\\boxed{\\boxed{7}}"), last_boxed(r"\\boxed{\\boxed{7}}", latex=True)
    ('7', '\\\\boxed{7}')
    >>> last_boxed(r"\\boxed{\\{1, 2\\}}", latex=True), last_boxed(r"so \\boxed 5.", bare=True)
    ('\\\\{1, 2\\\\}', '5.')
    """
    if not isinstance(text, str):
        return None
    found = _latex_box(text, fbox) if latex else _plain_box(text, (_BOX, _FBOX) if fbox else (_BOX,))
    if found is None and bare:
        for match in _BARE_BOX.finditer(text):
            found = match.group(1)
    if found is None:
        return None
    return found.strip() if strip else found


class _Openings:
    """The box openings of ``text`` from the last one backwards. Each opening's last
    position is kept until the limit passes it, so each is searched for once per
    occurrence, not once per limit (which would be quadratic for one that is absent)."""

    def __init__(self, text: str, openings: tuple[str, ...]) -> None:
        self.text = text
        self.found = {opening: text.rfind(opening) for opening in openings}

    def last(self, limit: int) -> tuple[int, int]:
        """Start of the last opening that ends before ``limit``, and of its content."""
        start, body = -1, -1
        for opening, at in self.found.items():
            if at + len(opening) > limit:
                at = self.found[opening] = self.text.rfind(opening, 0, limit)
            if at > start:
                start, body = at, at + len(opening)
        return start, body


def _plain_box(text: str, openings: tuple[str, ...]) -> str | None:
    # the common case, a last box without braces inside, costs a few C-level searches
    # (before any object is built: every game step reads one box)
    start = body = -1
    for opening in openings:
        at = text.rfind(opening)
        if at > start:
            start, body = at, at + len(opening)
    if start >= 0:
        end = text.find("}", body)
        if end >= 0 and "{" not in text[body:end]:
            return text[body:end]
    boxes = _Openings(text, openings)
    limit = len(text)
    while True:
        start, body = boxes.last(limit)
        if start < 0:
            return None
        depth, i = 1, body
        while i < limit and depth:
            char = text[i]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            i += 1
        if depth == 0:
            return text[body : i - 1]
        # this box never closes, so no earlier box that reaches it can close either: an
        # earlier box has to close before it. Scanning only up to here keeps it linear
        limit = start


def _latex_box(text: str, fbox: bool) -> str | None:
    # stack entries: where a box's content starts, -1 for an ordinary group
    stack: list[int] = []
    found: tuple[int, int] | None = None
    for match in (_LATEX_TOKENS_FBOX if fbox else _LATEX_TOKENS).finditer(text):
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
    return None if found is None else text[found[0] : found[1]]


_FENCE = "```"


def last_code_block(text: object, strict: bool = False) -> str | None:
    """Content of the last fenced code block (```` ```lang\\n…``` ````), stripped; ``None``
    if there is none. The fence's language tag is optional (``python``, ``py3``, ``c++``),
    spaces may follow it; the newline after it (``\\n`` or ``\\r\\n``) is not optional.

    ``strict=True`` reads fences as the reference package does: the tag is one word
    (letters, digits, ``_``) and ``\\n`` follows it at once, so ```` ```c++ ```` or a tag
    followed by a space opens no block.

    >>> last_code_block("try:\\n```python\\nprint(1)\\n```\\nor\\n```\\nprint(2)\\n```")
    'print(2)'
    >>> last_code_block("print(3)") is None
    True
    >>> last_code_block("```c++\\nint x;\\n```"), last_code_block("```c++\\nint x;\\n```", strict=True)
    ('int x;', None)
    """
    if not isinstance(text, str):
        return None
    tag_chars = "_" if strict else "_+.-"
    found, pos, n = None, 0, len(text)
    while (start := text.find(_FENCE, pos)) >= 0:
        i = start + len(_FENCE)
        while i < n and (text[i].isalnum() or text[i] in tag_chars):
            i += 1
        while not strict and i < n and text[i] in " \t":
            i += 1
        if not strict and text.startswith("\r\n", i):
            i += 2
        elif text.startswith("\n", i):
            i += 1
        else:  # not an opening fence; the next one may be
            pos = start + 1
            continue
        end = text.find(_FENCE, i)
        if end < 0:
            break
        found, pos = text[i:end], end + len(_FENCE)
    return None if found is None else found.strip()
