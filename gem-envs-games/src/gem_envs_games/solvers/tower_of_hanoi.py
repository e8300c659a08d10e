"""Optimal Tower of Hanoi play from any position, read off the observation text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gem_envs_games.solvers import seen

_TOWER_LINE = re.compile(r"^([ABC]): \[([\d, ]*)\]$", re.MULTILINE)


def read_towers(observation: str) -> dict[str, list[int]]:
    """The last rendering of the towers in ``observation`` (disks bottom to top)."""
    towers: dict[str, list[int]] = {}
    for name, disks in _TOWER_LINE.findall(observation):
        towers[name] = [int(d) for d in disks.split(",") if d.strip()]
    if set(towers) != set("ABC"):
        raise ValueError("no tower listing (A: [...], B: [...], C: [...]) in the observation")
    return towers


def next_move(towers: dict[str, list[int]], target: str = "C") -> tuple[str, str] | None:
    """The first move of a shortest plan that stacks every disk on ``target``.

    The largest disk not yet on its goal tower must move there directly, after the
    smaller disks have cleared to the third tower; that recursion is optimal from
    any legal position.

    >>> next_move({"A": [2, 1], "B": [], "C": []})
    ('A', 'B')
    """
    where = {disk: name for name, disks in towers.items() for disk in disks}
    for disk in sorted(where, reverse=True):
        if where[disk] != target:
            break
    else:
        return None
    # move `disk` to `target`: the smaller ones must first go to the spare tower
    while True:
        source = where[disk]
        spare = ({"A", "B", "C"} - {source, target}).pop()
        blocker = next((d for d in range(disk - 1, 0, -1) if where[d] != spare), None)
        if blocker is None:
            return source, target
        disk, target = blocker, spare


class Solver:
    """Plays Tower of Hanoi optimally (``2**n - 1`` moves from the start)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self) -> None:
        """Nothing to forget: every move is computed from the observation."""

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        move = next_move(read_towers(observation))
        if move is None:
            raise ValueError("the towers are already solved")
        return f"\\boxed{{{move[0]} {move[1]}}}"
