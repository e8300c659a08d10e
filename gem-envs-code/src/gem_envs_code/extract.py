"""Find the program in an agent's answer: the last fenced code block (GEM's rule).

``extract_code`` is :func:`gem.parsing.last_code_block` under the name this package
has always exported it by.

>>> extract_code("Try this:\\n```python\\nprint(1)\\n```\\nor\\n```\\nprint(2)\\n```")
'print(2)'
"""

from __future__ import annotations

from gem.parsing import last_code_block as extract_code

__all__ = ["extract_code"]
