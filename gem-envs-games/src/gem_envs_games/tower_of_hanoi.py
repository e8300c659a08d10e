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

import re
from typing import Any

import gem
from gem_envs_games.parsing import extract_boxed

TOWERS = "ABC"
#: (num_disks, max_turns) drawn per episode when a setting is None (GEM's random preset)
RANDOM_PRESETS = ((3, 10), (4, 20), (5, 35))

_MOVE = re.compile(r"^\s*([ABC])\s*(?:,|->|to)?\s*([ABC])\s*$", re.IGNORECASE)
_NO_EPISODE = "No episode is running: call reset() to start one."


def parse_move(text: str) -> tuple[str, str] | None:
    """``(source, target)`` from the content of the box, e.g. ``"A C"`` or ``"a,c"``.

    >>> parse_move("a, c")
    ('A', 'C')
    >>> parse_move("A D") is None
    True
    """
    match = _MOVE.match(text)
    return (match.group(1).upper(), match.group(2).upper()) if match else None


def render_towers(towers: dict[str, list[int]]) -> str:
    """One line per tower, disks listed bottom to top (``A: [3, 2, 1]``)."""
    return "\n".join(f"{name}: {towers[name]}" for name in TOWERS)


class TowerofHanoiEnv(gem.Env):
    """Tower of Hanoi with ``num_disks`` disks and ``max_turns`` turns.

    With ``num_disks`` or ``max_turns`` set to None, every episode draws one of
    :data:`RANDOM_PRESETS`. The optimal solution takes ``2**n - 1`` moves, which fits
    every preset's turn limit.

    >>> env = TowerofHanoiEnv(num_disks=None, max_turns=None)
    >>> _ = env.reset(seed=1); (env.num_disks, env.max_turns) in RANDOM_PRESETS
    True
    """

    def __init__(self, num_disks: int | None = 3, max_turns: int | None = 100) -> None:
        if num_disks is not None and num_disks < 1:
            raise ValueError(f"num_disks must be at least 1, got {num_disks}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self._settings = (num_disks, max_turns)
        self._random = num_disks is None or max_turns is None
        self.num_disks, self.max_turns = (3, 10) if self._random else (num_disks, max_turns)
        self.towers: dict[str, list[int]] = {name: [] for name in TOWERS}
        self.turn = 0
        self.done = True

    # -- the episode ------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        if self._random:
            self.num_disks, self.max_turns = self.rng.choice(RANDOM_PRESETS)
        self.towers = {"A": list(range(self.num_disks, 0, -1)), "B": [], "C": []}
        self.turn = 0
        self.done = False
        rules = (
            f"You are playing Tower of Hanoi with {self.num_disks} disks (1 is the smallest).\n"
            "Move the whole stack from tower A to tower C. Each turn you move the top disk of one "
            "tower onto another tower; a disk may never rest on a smaller disk.\n"
            f"You have {self.max_turns} turns. Towers are listed bottom to top.\n"
            "Answer with the source and target tower in \\boxed{}, e.g. \\boxed{A C}."
        )
        return f"{rules}\n\n{self._board_text()}", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return _NO_EPISODE, 0.0, True, False, {}
        self.turn += 1
        boxed = extract_boxed(action)
        move = parse_move(boxed) if boxed is not None else None
        if move is None:
            self.done = True
            feedback = f"Turn {self.turn}: no move found. Answer like \\boxed{{A C}}. The game is over."
            return feedback, -0.1, True, self.turn >= self.max_turns, {"correct": False}
        src, dst = move
        reward = 0.0
        if not self.towers[src]:
            feedback = f"Turn {self.turn}: tower {src} is empty; nothing moved."
        elif src == dst:
            feedback = f"Turn {self.turn}: source and target are both {src}; nothing moved."
        elif self.towers[dst] and self.towers[dst][-1] < self.towers[src][-1]:
            feedback = (
                f"Turn {self.turn}: disk {self.towers[src][-1]} cannot go on the smaller "
                f"disk {self.towers[dst][-1]}; nothing moved."
            )
        else:
            disk = self.towers[src].pop()
            self.towers[dst].append(disk)
            feedback = f"Turn {self.turn}: moved disk {disk} from {src} to {dst}."
            if len(self.towers["C"]) == self.num_disks:
                self.done = True
                return f"{feedback} Solved!\n\n{render_towers(self.towers)}", 1.0, True, False, {"correct": True}
        if self.turn >= self.max_turns:
            self.done = True
            reward = len(self.towers["C"]) / self.num_disks
            feedback += f" That was the last turn: {len(self.towers['C'])} of {self.num_disks} disks are on C."
            return f"{feedback}\n\n{render_towers(self.towers)}", reward, True, True, {"correct": False}
        return f"{feedback}\n\n{self._board_text()}", reward, False, False, {}

    def _board_text(self) -> str:
        left = self.max_turns - self.turn
        return f"Towers (bottom to top):\n{render_towers(self.towers)}\nTurns left: {left}. Enter your move."

    def sample_random_action(self) -> str:
        """A random well-formed move; drawn from the numpy stream, so sampling leaves the
        game's own draws (``self.rng``) unchanged."""
        src, dst = self.np_random.choice(list(TOWERS), size=2, replace=False)
        return f"\\boxed{{{src} {dst}}}"

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "num_disks": self.num_disks,
            "max_turns": self.max_turns,
            "towers": {name: list(disks) for name, disks in self.towers.items()},
            "turn": self.turn,
            "done": self.done,
            "rng": self.rng_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.num_disks, self.max_turns = state["num_disks"], state["max_turns"]
        self.towers = {name: list(state["towers"][name]) for name in TOWERS}
        self.turn, self.done = state["turn"], state["done"]
        self.set_rng_state(state["rng"])


def register(registry: Any) -> None:
    """Register GEM's Tower of Hanoi ids."""
    entry = "gem_envs_games.tower_of_hanoi:TowerofHanoiEnv"
    registry.register("game:TowerofHanoi-v0", entry)
    registry.register("game:TowerofHanoi-v0-easy", entry, num_disks=3, max_turns=10)
    registry.register("game:TowerofHanoi-v0-hard", entry, num_disks=5, max_turns=35)
    registry.register("game:TowerofHanoi-v0-random", entry, num_disks=None, max_turns=None)
