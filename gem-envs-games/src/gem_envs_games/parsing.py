"""Reading the agent's move out of its text."""

from __future__ import annotations

_BOXED = "\\boxed{"


def extract_boxed(text: object) -> str | None:
    """The content of the last ``\\boxed{...}`` (nested braces allowed), or None.

    >>> extract_boxed("I guess \\\\boxed{5} ... no, \\\\boxed{ {7} }")
    ' {7} '
    >>> extract_boxed("no box") is None
    True
    """
    if not isinstance(text, str):
        return None
    start = text.rfind(_BOXED)
    while start != -1:
        depth, i = 1, start + len(_BOXED)
        while i < len(text):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len(_BOXED) : i]
            i += 1
        # unbalanced: try an earlier box
        start = text.rfind(_BOXED, 0, start)
    return None
