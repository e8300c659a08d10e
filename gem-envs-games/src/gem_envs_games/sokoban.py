"""Sokoban: push every box onto a goal within the turn limit.

>>> env = SokobanEnv(dim_room=(6, 6), num_boxes=2, max_turns=20)
>>> obs, info = env.reset(seed=0)
>>> obs.count("X") + obs.count("√") >= 2
True

Levels are made by playing backwards from the solved position: the player walks
and *pulls* boxes off their goals for at most ``max_turns`` moves. Replaying that
walk forwards solves the level, so every level can be solved within the limit
(the package's tests also solve each preset with a search-based solver).

Rewards (GEM's): 1.0 when every box is on a goal, 0 for every other move (a move
into a wall or an immovable box changes nothing), -0.1 and the episode ends for a
reply without a readable ``\\boxed{direction}``. When the turns run out the last
reward is the fraction of boxes on goals.
"""

from __future__ import annotations

from typing import Any

import gem
from gem_envs_games.parsing import extract_boxed

#: ((rows, cols), num_boxes, max_turns) drawn per episode when a setting is None (GEM's random preset)
RANDOM_PRESETS = (((6, 6), 2, 20), ((8, 8), 5, 50))
STEPS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
#: board symbols (GEM's): wall, floor, goal, box, box on goal, player, player on goal
WALL, FLOOR, GOAL, BOX, BOX_ON_GOAL, PLAYER, PLAYER_ON_GOAL = "#", "_", "O", "X", "√", "P", "S"

# carving patterns for the room generator: cells opened around the walker
_PATTERNS = (
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, -1), (1, 0)),
    ((0, 0), (0, 1), (1, 0)),
)
# reverse walks tried per room, and rooms tried per level
_WALKS_PER_ROOM = 12
_ROOMS_PER_LEVEL = 200
_NO_EPISODE = "No episode is running: call reset() to start one."

Cell = tuple[int, int]


def render_level(rows: int, cols: int, walls: set[Cell], goals: set[Cell], boxes: set[Cell], player: Cell) -> str:
    """The board, one symbol per cell separated by spaces."""
    lines = []
    for r in range(rows):
        cells = []
        for c in range(cols):
            cell = (r, c)
            if cell in walls:
                cells.append(WALL)
            elif cell == player:
                cells.append(PLAYER_ON_GOAL if cell in goals else PLAYER)
            elif cell in boxes:
                cells.append(BOX_ON_GOAL if cell in goals else BOX)
            else:
                cells.append(GOAL if cell in goals else FLOOR)
        lines.append(" ".join(cells))
    return "\n".join(lines)


def push(walls: set[Cell], boxes: set[Cell], player: Cell, direction: str) -> tuple[Cell, set[Cell]] | None:
    """``(player, boxes)`` after moving ``direction``, or None if the move is blocked.

    >>> push(set(), {(0, 1)}, (0, 0), "right")
    ((0, 1), {(0, 2)})
    """
    dr, dc = STEPS[direction]
    ahead = (player[0] + dr, player[1] + dc)
    if ahead in walls:
        return None
    if ahead in boxes:
        beyond = (ahead[0] + dr, ahead[1] + dc)
        if beyond in walls or beyond in boxes:
            return None
        return ahead, (boxes - {ahead}) | {beyond}
    return ahead, boxes


class SokobanEnv(gem.Env):
    """Sokoban in a ``dim_room`` grid (outer walls included) with ``num_boxes`` boxes.

    With a setting None, each episode draws one of :data:`RANDOM_PRESETS`.
    """

    def __init__(
        self,
        dim_room: tuple[int, int] | list[int] | None = (6, 6),
        max_turns: int | None = 100,
        num_boxes: int | None = 3,
    ) -> None:
        if dim_room is not None and (len(dim_room) != 2 or min(dim_room) < 5):
            raise ValueError(f"dim_room must be (rows, cols), each at least 5; got {dim_room}")
        if num_boxes is not None and num_boxes < 1:
            raise ValueError(f"num_boxes must be at least 1, got {num_boxes}")
        if max_turns is not None and max_turns < 2:
            raise ValueError(f"max_turns must be at least 2, got {max_turns}")
        self._random = dim_room is None or num_boxes is None or max_turns is None
        if self._random:
            dim_room, num_boxes, max_turns = RANDOM_PRESETS[0]
        self.dim_room: tuple[int, int] = (int(dim_room[0]), int(dim_room[1]))
        self.num_boxes: int = num_boxes
        self.max_turns: int = max_turns
        self.walls: set[Cell] = set()
        self.goals: set[Cell] = set()
        self.boxes: set[Cell] = set()
        self.player: Cell = (0, 0)
        self.turn = 0
        self.done = True

    # -- the episode ------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        if self._random:
            dim_room, self.num_boxes, self.max_turns = self.rng.choice(RANDOM_PRESETS)
            self.dim_room = tuple(dim_room)
        self._generate()
        self.turn = 0
        self.done = False
        rules = (
            "You are playing Sokoban. Push every box onto a goal.\n"
            "Each turn you move one cell up, down, left or right. Walking into a box pushes it one "
            "cell, if the cell behind it is free; you cannot pull boxes or push two at once.\n"
            f"You have {self.max_turns} turns. Symbols: {PLAYER} you, {WALL} wall, {FLOOR} floor, "
            f"{GOAL} empty goal, {BOX} box, {BOX_ON_GOAL} box on a goal, {PLAYER_ON_GOAL} you on a goal.\n"
            "Answer with the direction in \\boxed{}, e.g. \\boxed{up}."
        )
        return f"{rules}\n\n{self._board_text()}", {}

    def _generate(self) -> None:
        for _ in range(_ROOMS_PER_LEVEL):
            floor = self._carve_room()
            if len(floor) < self.num_boxes + 3:
                continue
            cells = sorted(floor)
            goals = self.rng.sample(cells, self.num_boxes)
            player = self.rng.choice([c for c in cells if c not in goals])
            walls = {(r, c) for r in range(self.dim_room[0]) for c in range(self.dim_room[1])} - floor
            level = self._reverse_play(walls, set(goals), player)
            if level is not None:
                self.walls, self.goals = walls, set(goals)
                self.boxes, self.player = level
                return
        raise RuntimeError(
            f"could not build a Sokoban level with {self.num_boxes} boxes in a {self.dim_room} room; "
            "use a bigger room or fewer boxes"
        )

    def _carve_room(self) -> set[Cell]:
        rows, cols = self.dim_room
        rng = self.rng
        r, c = rng.randint(1, rows - 2), rng.randint(1, cols - 2)
        step = rng.choice(list(STEPS.values()))
        floor: set[Cell] = set()
        for _ in range(int(1.7 * (rows + cols))):
            if rng.random() < 0.35:
                step = rng.choice(list(STEPS.values()))
            r = min(max(r + step[0], 1), rows - 2)
            c = min(max(c + step[1], 1), cols - 2)
            for dr, dc in rng.choice(_PATTERNS):
                if 1 <= r + dr <= rows - 2 and 1 <= c + dc <= cols - 2:
                    floor.add((r + dr, c + dc))
        return floor

    def _reverse_play(self, walls: set[Cell], goals: set[Cell], player: Cell) -> tuple[set[Cell], Cell] | None:
        """The hardest-looking start among random backward walks from the solved level:
        every box off its goal, the boxes moved as far as possible. A backward walk of
        ``k`` moves is a forward solution of ``k`` moves, so ``k <= max_turns`` keeps the
        level solvable in time."""
        rng = self.rng
        best: tuple[int, set[Cell], Cell] | None = None
        for _ in range(_WALKS_PER_ROOM):
            home = {g: g for g in goals}  # box now -> the goal it started on
            at = player
            for _ in range(self.max_turns):
                options = []
                for dr, dc in STEPS.values():
                    ahead, behind = (at[0] + dr, at[1] + dc), (at[0] - dr, at[1] - dc)
                    if ahead in walls or ahead in home:
                        continue
                    options.append((ahead, behind if behind in home else None))
                if not options:
                    break
                pulls = [o for o in options if o[1] is not None]
                ahead, pulled = rng.choice(pulls if pulls and rng.random() < 0.8 else options)
                if pulled is not None and rng.random() < 0.8:
                    home[at] = home.pop(pulled)
                at = ahead
                if all(box not in goals for box in home):
                    score = sum(abs(b[0] - g[0]) + abs(b[1] - g[1]) for b, g in home.items())
                    if best is None or score > best[0]:
                        best = (score, set(home), at)
        return None if best is None else (best[1], best[2])

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return _NO_EPISODE, 0.0, True, False, {}
        self.turn += 1
        boxed = extract_boxed(action)
        direction = boxed.strip().lower() if boxed is not None else None
        if direction not in STEPS:
            self.done = True
            feedback = f"Turn {self.turn}: no move found. Answer like \\boxed{{up}}. The game is over."
            return feedback, -0.1, True, self.turn >= self.max_turns, {"correct": False}
        moved = push(self.walls, self.boxes, self.player, direction)
        if moved is None:
            feedback = f"Turn {self.turn}: you cannot move {direction} (wall, or a box that cannot move)."
        else:
            pushed = moved[1] != self.boxes
            self.player, self.boxes = moved
            feedback = f"Turn {self.turn}: you moved {direction}" + (" and pushed a box." if pushed else ".")
            if self.boxes <= self.goals:
                self.done = True
                return f"{feedback} Every box is on a goal!\n\n{self._render()}", 1.0, True, False, {"correct": True}
        if self.turn >= self.max_turns:
            self.done = True
            placed = len(self.boxes & self.goals)
            feedback += f" That was the last turn: {placed} of {self.num_boxes} boxes are on goals."
            return f"{feedback}\n\n{self._render()}", placed / self.num_boxes, True, True, {"correct": False}
        return f"{feedback}\n\n{self._board_text()}", 0.0, False, False, {}

    def _render(self) -> str:
        return render_level(*self.dim_room, self.walls, self.goals, self.boxes, self.player)

    def _board_text(self) -> str:
        left = self.max_turns - self.turn
        return f"Board:\n{self._render()}\nTurns left: {left}. Enter your move."

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(list(STEPS))}}}"

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "dim_room": list(self.dim_room),
            "num_boxes": self.num_boxes,
            "max_turns": self.max_turns,
            "walls": sorted(map(list, self.walls)),
            "goals": sorted(map(list, self.goals)),
            "boxes": sorted(map(list, self.boxes)),
            "player": list(self.player),
            "turn": self.turn,
            "done": self.done,
            "rng": self.rng_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.dim_room = (state["dim_room"][0], state["dim_room"][1])
        self.num_boxes, self.max_turns = state["num_boxes"], state["max_turns"]
        self.walls = {(r, c) for r, c in state["walls"]}
        self.goals = {(r, c) for r, c in state["goals"]}
        self.boxes = {(r, c) for r, c in state["boxes"]}
        self.player = (state["player"][0], state["player"][1])
        self.turn, self.done = state["turn"], state["done"]
        self.set_rng_state(state["rng"])


def register(registry: Any) -> None:
    """Register GEM's Sokoban ids."""
    entry = "gem_envs_games.sokoban:SokobanEnv"
    registry.register("game:Sokoban-v0", entry)
    registry.register("game:Sokoban-v0-easy", entry, dim_room=(6, 6), num_boxes=2, max_turns=20)
    registry.register("game:Sokoban-v0-hard", entry, dim_room=(8, 8), num_boxes=4, max_turns=50)
    registry.register("game:Sokoban-v0-random", entry, dim_room=None, num_boxes=None, max_turns=None)
