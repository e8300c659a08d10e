"""Tower of Hanoi: move every disk from tower A to tower C, one disk per turn.

>>> env = TowerofHanoiEnv(num_disks=3, max_turns=10)
>>> obs, info = env.reset(seed=0)
>>> env.step("\\\\boxed{A C}")[1]
0.0

Rewards (GEM's): 1.0 when the stack is complete on C, 0 for every other move
(legal or not), -0.1 and the episode ends for a reply without a readable
``\\boxed{X Y}``. When the turns run out the last reward is the fraction of the
disks already on C.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from gem_envs_games.base import Outcome, TurnGame, at_least, reference_alias

TOWERS = "ABC"
_TOWER_NAMES = tuple(TOWERS)
#: every well-formed move, for random actions
_MOVES = tuple(f"\\boxed{{{src} {dst}}}" for src in TOWERS for dst in TOWERS if src != dst)
#: (num_disks, max_turns) drawn per episode when a setting is None (GEM's random preset)
RANDOM_PRESETS = ((3, 10), (4, 20), (5, 35))

#: what may stand between the two towers of a move (any case, with whitespace around)
_SEPARATORS = ("", ",", "->", "to")


def parse_move(text: str) -> tuple[str, str] | None:
    """``(source, target)`` from the content of the box, e.g. ``"A C"`` or ``"a,c"``.

    Plain string operations, no regex: linear in the length of any hostile box.

    >>> parse_move("a, c"), parse_move("A to B"), parse_move("b->a")
    (('A', 'C'), ('A', 'B'), ('B', 'A'))
    >>> parse_move("A D") is None
    True
    """
    move = text.strip()
    if len(move) < 2:
        return None
    source, target = move[0].upper(), move[-1].upper()
    if source not in _TOWER_NAMES or target not in _TOWER_NAMES:
        return None
    return (source, target) if move[1:-1].strip().lower() in _SEPARATORS else None


def render_towers(towers: dict[str, list[int]]) -> str:
    """One line per tower, disks listed bottom to top (``A: [3, 2, 1]``)."""
    # drawn on every step, from few distinct positions (3 ** disks): looked up, not formatted
    return _render(tuple(towers["A"]), tuple(towers["B"]), tuple(towers["C"]))


@lru_cache(maxsize=1 << 12)
def _render(a: tuple[int, ...], b: tuple[int, ...], c: tuple[int, ...]) -> str:
    return f"A: {list(a)}\nB: {list(b)}\nC: {list(c)}"


class TowerofHanoiEnv(TurnGame):
    """Tower of Hanoi with ``num_disks`` disks and ``max_turns`` turns.

    With ``num_disks`` or ``max_turns`` set to None, every episode draws one of
    :data:`RANDOM_PRESETS`. The optimal solution takes ``2**n - 1`` moves, which fits
    every preset's turn limit.

    >>> env = TowerofHanoiEnv(num_disks=None, max_turns=None)
    >>> _ = env.reset(seed=1); (env.num_disks, env.max_turns) in RANDOM_PRESETS
    True
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    board = reference_alias("towers")

    format_error = "no move found. Answer like \\boxed{A C}."

    def __init__(self, num_disks: int | None = 3, max_turns: int | None = 100) -> None:
        at_least("num_disks", num_disks, 1)
        at_least("max_turns", max_turns, 1)
        self._settings = (num_disks, max_turns)
        self._random = num_disks is None or max_turns is None
        self.num_disks, self.max_turns = (3, 10) if self._random else (num_disks, max_turns)
        self.towers: dict[str, list[int]] = {name: [] for name in TOWERS}

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            self.num_disks, self.max_turns = self.rng.choice(RANDOM_PRESETS)
        self.towers = {"A": list(range(self.num_disks, 0, -1)), "B": [], "C": []}
        return (
            f"You are playing Tower of Hanoi with {self.num_disks} disks (1 is the smallest).\n"
            "Move the whole stack from tower A to tower C. Each turn you move the top disk of one "
            "tower onto another tower; a disk may never rest on a smaller disk.\n"
            f"You have {self.max_turns} turns. Towers are listed bottom to top.\n"
            "Answer with the source and target tower in \\boxed{}, e.g. \\boxed{A C}."
        )

    parse_move = staticmethod(parse_move)

    def play(self, move: tuple[str, str]) -> str | Outcome:
        src, dst = move
        if not self.towers[src]:
            return f"tower {src} is empty; nothing moved."
        if src == dst:
            return f"source and target are both {src}; nothing moved."
        if self.towers[dst] and self.towers[dst][-1] < self.towers[src][-1]:
            top, under = self.towers[src][-1], self.towers[dst][-1]
            return f"disk {top} cannot go on the smaller disk {under}; nothing moved."
        disk = self.towers[src].pop()
        self.towers[dst].append(disk)
        feedback = f"moved disk {disk} from {src} to {dst}."
        if len(self.towers["C"]) == self.num_disks:
            return Outcome.win(f"{feedback} Solved!\n\n{render_towers(self.towers)}")
        return feedback

    def last_turn_note(self) -> str:
        on_c = len(self.towers["C"])
        return f" That was the last turn: {on_c} of {self.num_disks} disks are on C.\n\n{render_towers(self.towers)}"

    def partial_credit(self) -> float:
        """The fraction of the disks on C."""
        return len(self.towers["C"]) / self.num_disks

    def task_suffix(self) -> str:
        left = self.max_turns - self.turn
        return f"Towers (bottom to top):\n{render_towers(self.towers)}\nTurns left: {left}. Enter your move."

    def sample_random_action(self) -> str:
        """A random well-formed move; drawn from the numpy stream, so sampling leaves the
        game's own draws (``self.rng``) unchanged."""
        return _MOVES[int(self.np_random.random() * len(_MOVES))]

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {"num_disks": self.num_disks, "towers": {name: list(disks) for name, disks in self.towers.items()}}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.num_disks = state["num_disks"]
        self.towers = {name: list(state["towers"][name]) for name in TOWERS}


def register(registry: Any) -> None:
    """Register GEM's Tower of Hanoi ids."""
    entry = "gem_envs_games.tower_of_hanoi:TowerofHanoiEnv"
    registry.register("game:TowerofHanoi-v0", entry)
    registry.register("game:TowerofHanoi-v0-easy", entry, num_disks=3, max_turns=10)
    registry.register("game:TowerofHanoi-v0-hard", entry, num_disks=5, max_turns=35)
    registry.register("game:TowerofHanoi-v0-random", entry, num_disks=None, max_turns=None)
