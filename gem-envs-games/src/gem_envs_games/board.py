"""Text rendering of grid boards, shared by the grid games, and its inverse for
solvers that read the board back from an observation.

>>> print(render_grid([["A", "."], ["_", "B"]]))
    0  1
 0  A  .
 1  _  B
>>> parse_grid("Board:\\n" + render_grid([["[A]", "."], ["_", "B"]]) + "\\nYour move.")
[['[A]', '.'], ['_', 'B']]
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache


def render_grid(cells: Sequence[Sequence[str]], cell_width: int | None = None) -> str:
    """The grid with 0-based column numbers on top and row numbers on the left.

    Cells are right-aligned in columns one wider than the widest cell (at least 3
    characters), so boards of up to 100 rows or columns line up. A caller whose cells
    all have one known width passes it as ``cell_width`` (boards are drawn on every
    step, and finding the widest cell is a good part of the cost).
    """
    if cell_width is None:
        cell_width = max((len(cell) for row in cells for cell in row), default=1)
    pad = max(cell_width + 1, 3)
    width = max(map(len, cells), default=0)
    lines = [_header(width, pad)]
    if cell_width == 1 and pad == 3:
        # one-character cells: the row is its cells two spaces apart, behind two spaces
        lines.extend(f"{r:>2}  " + "  ".join(row) if row else f"{r:>2}" for r, row in enumerate(cells))
    else:
        lines.extend(f"{r:>2}" + "".join([cell.rjust(pad) for cell in row]) for r, row in enumerate(cells))
    return "\n".join(lines)


@lru_cache(maxsize=64)
def _header(width: int, pad: int) -> str:
    return "  " + "".join(str(c).rjust(pad) for c in range(width))


def parse_grid(text: str) -> list[list[str]]:
    """The cells of the last grid :func:`render_grid` drew in ``text`` (empty if none).

    Cells must not contain spaces, which holds for every board the games draw.
    """
    lines = text.splitlines()
    # the header is the column numbers 0..n-1 behind at least 3 spaces (row lines have at most 1)
    starts = [i for i, line in enumerate(lines) if line.startswith("   ") and _is_count(line.split())]
    if not starts:
        return []
    width = len(lines[starts[-1]].split())
    grid = []
    for line in lines[starts[-1] + 1 :]:
        parts = line.split()
        if len(parts) != width + 1 or parts[0] != str(len(grid)):
            break
        grid.append(parts[1:])
    return grid


def _is_count(tokens: list[str]) -> bool:
    return bool(tokens) and tokens == [str(i) for i in range(len(tokens))]
