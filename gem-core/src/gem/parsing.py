"""Read an answer out of a response: the last ``<answer>…</answer>`` or the last ``\\boxed{…}``.

Every suite that reads answers or moves from free text uses these. Both run in one
linear pass over untrusted text (``str.rfind`` and a brace counter, no backtracking
regex), so a megabyte of unclosed tags costs milliseconds.
"""

from __future__ import annotations

_OPEN, _CLOSE = "<answer>", "</answer>"
_BOX = "\\boxed{"


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


def last_boxed(text: object, strip: bool = True) -> str | None:
    """Content of the last ``\\boxed{…}`` whose braces balance (stripped unless
    ``strip=False``); ``None`` if there is none.

    >>> last_boxed(r"first \\boxed{1}, then \\boxed{{a} b}")
    '{a} b'
    """
    if not isinstance(text, str):
        return None
    # the common case, a last box without braces inside, costs a few C-level searches
    body = text.rfind(_BOX) + len(_BOX)
    if body >= len(_BOX):
        end = text.find("}", body)
        if end >= 0:
            content = text[body:end]
            if "{" not in content:
                return content.strip() if strip else content
    limit = len(text)
    while (start := text.rfind(_BOX, 0, limit)) >= 0:
        depth = 1
        i = start + len(_BOX)
        while i < limit and depth:
            char = text[i]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            i += 1
        if depth == 0:
            content = text[start + len(_BOX) : i - 1]
            return content.strip() if strip else content
        # this box never closes, so no earlier box that reaches it can close either: an
        # earlier box has to close before it. Scanning only up to here keeps it linear
        limit = start
    return None


_FENCE = "```"


def last_code_block(text: object) -> str | None:
    """Content of the last fenced code block (```` ```lang\\n…``` ````), stripped; ``None``
    if there is none. The fence's language tag is optional; the newline after it is not.

    >>> last_code_block("try:\\n```python\\nprint(1)\\n```\\nor\\n```\\nprint(2)\\n```")
    'print(2)'
    >>> last_code_block("print(3)") is None
    True
    """
    if not isinstance(text, str):
        return None
    found, pos, n = None, 0, len(text)
    while (start := text.find(_FENCE, pos)) >= 0:
        i = start + len(_FENCE)
        while i < n and (text[i].isalnum() or text[i] in "_+.-"):
            i += 1
        while i < n and text[i] in " \t":
            i += 1
        if text.startswith("\r\n", i):
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
