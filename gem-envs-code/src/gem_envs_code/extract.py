"""Find the program in an agent's answer: the last fenced code block (GEM's rule)."""

from __future__ import annotations

import re

# an opening fence, an optional language tag (``python``, ``py3``, ``c++``), a newline,
# then everything up to the next fence
_FENCED = re.compile(r"```[\w+.-]*[ \t]*\r?\n(.*?)```", re.DOTALL)


def extract_code(answer: str) -> str | None:
    """The contents of the last fenced code block of ``answer``, or ``None`` if it has none.

    >>> extract_code("Try this:\\n```python\\nprint(1)\\n```\\nor\\n```\\nprint(2)\\n```")
    'print(2)'
    >>> extract_code("print(3)") is None
    True
    """
    blocks = _FENCED.findall(answer)
    return blocks[-1].strip() if blocks else None
