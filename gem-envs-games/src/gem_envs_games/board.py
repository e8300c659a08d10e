"""Text rendering of grid boards, shared by the grid games.

>>> print(render_grid([["A", "."], ["_", "B"]]))
    0  1
 0  A  .
 1  _  B
"""

from __future__ import annotations

from collections.abc import Sequence


def render_grid(cells: Sequence[Sequence[str]]) -> str:
    """The grid with 0-based column numbers on top and row numbers on the left.

    Every cell is right-aligned in a 3-character column, so cells of up to three
    characters (``"[A]"``) and boards of up to 100 rows or columns line up.
    """
    width = max((len(row) for row in cells), default=0)
    lines = ["  " + "".join(f"{c:>3}" for c in range(width))]
    lines.extend(f"{r:>2}" + "".join(f"{cell:>3}" for cell in row) for r, row in enumerate(cells))
    return "\n".join(lines)
