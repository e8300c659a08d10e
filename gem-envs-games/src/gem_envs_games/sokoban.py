"""Sokoban: push every box onto a goal within the turn limit.

>>> env = SokobanEnv(dim_room=(6, 6), num_boxes=2, max_turns=20)
>>> obs, info = env.reset(seed=0)
>>> info["suffix"].count("X") + info["suffix"].count("√") >= 2
True

Levels are made by playing backwards from the solved position: the player walks
and *pulls* boxes off their goals for at most ``max_turns`` moves. Replaying that
walk forwards solves the level, so every level can be solved within the limit; of
several such walks the generator keeps the start whose shortest solution (found by
search) is longest.

Rewards (GEM's): 1.0 when every box is on a goal, 0 for every other move (a move
into a wall or an immovable box changes nothing), -0.1 and the episode ends for a
reply without a readable ``\\boxed{direction}``. When the turns run out the last
reward is the fraction of boxes on goals.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from gem_envs_games.base import DirectionGame, Outcome, at_least

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
# rooms tried for a level with a longer solution; positions the generator's search may
# expand per level; carved rooms tried at most, then open rooms (every inner cell floor)
_ROOMS_FOR_HARDER = 8
_SEARCH_BUDGET = 2000
_CARVED_ROOMS = 2000
_OPEN_ROOMS = 200

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


class SokobanEnv(DirectionGame):
    """Sokoban in a ``dim_room`` grid (outer walls included) with ``num_boxes`` boxes.

    With a setting None, each episode draws one of :data:`RANDOM_PRESETS`.
    """

    format_error = "no move found. Answer like \\boxed{up}."
    directions = tuple(STEPS)

    # -- the reference package's names: views of walls, goals, boxes and player ---------
    #: the four moves, in the reference's order
    action_space = property(lambda self: list(self.directions))

    @property
    def room_fixed(self) -> np.ndarray:
        """The level without its movable parts, the reference's codes: 0 wall, 1 floor, 2 goal (a new array)."""
        room = np.ones(self.dim_room, dtype=np.int64)
        for cells, code in ((self.walls, 0), (self.goals, 2)):
            for r, c in cells:
                room[r, c] = code
        return room

    @property
    def room_state(self) -> np.ndarray:
        """The level as it is now, the reference's codes: 0 wall, 1 floor, 2 empty goal, 3 box on a goal,
        4 box, 5 player (on a goal too, as the reference); a new array: assign ``player_position`` to move."""
        room = self.room_fixed
        for r, c in self.boxes:
            room[r, c] = 3 if (r, c) in self.goals else 4
        room[self.player] = 5
        return room

    @property
    def player_position(self) -> np.ndarray:
        """``array([row, col])`` of the player, as the reference holds it."""
        return np.array(self.player)

    @player_position.setter
    def player_position(self, position: Any) -> None:
        cell = (int(position[0]), int(position[1]))
        if not (0 <= cell[0] < self.dim_room[0] and 0 <= cell[1] < self.dim_room[1]) or cell in self.walls \
                or cell in self.boxes:
            raise ValueError(f"the player cannot stand on {cell}: off the room, a wall or a box")
        self.player = cell

    def __init__(
        self,
        dim_room: tuple[int, int] | list[int] | None = (6, 6),
        max_turns: int | None = 100,
        num_boxes: int | None = 3,
    ) -> None:
        if dim_room is not None and (len(dim_room) != 2 or min(dim_room) < 5):
            raise ValueError(f"dim_room must be (rows, cols), each at least 5; got {dim_room}")
        at_least("num_boxes", num_boxes, 1)
        at_least("max_turns", max_turns, 2)
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
        #: moves of the shortest solution of this episode's level (an upper bound on it for
        #: the rare level too costly to search at reset)
        self.optimal_moves = 0

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            dim_room, self.num_boxes, self.max_turns = self.rng.choice(RANDOM_PRESETS)
            self.dim_room = tuple(dim_room)
        self._generate()
        return (
            "You are playing Sokoban. Push every box onto a goal.\n"
            "Each turn you move one cell up, down, left or right. Walking into a box pushes it one "
            "cell, if the cell behind it is free; you cannot pull boxes or push two at once.\n"
            f"You have {self.max_turns} turns. Symbols: {PLAYER} you, {WALL} wall, {FLOOR} floor, "
            f"{GOAL} empty goal, {BOX} box, {BOX_ON_GOAL} box on a goal, {PLAYER_ON_GOAL} you on a goal.\n"
            "Answer with the direction in \\boxed{}, e.g. \\boxed{up}."
        )

    def _generate(self) -> None:
        rows, cols = self.dim_room
        grid = {(r, c) for r in range(rows) for c in range(cols)}
        best = None
        for attempt, floor in enumerate(self._rooms()):
            # a box can leave a goal only if the player has two free cells in line behind it
            pullable = sorted(c for c in floor if any(_ahead(c, d, 1) in floor and _ahead(c, d, 2) in floor
                                                      for d in STEPS.values()))
            if len(floor) < 2 * self.num_boxes + 2 or len(pullable) < self.num_boxes:
                continue
            goals = set(self.rng.sample(pullable, self.num_boxes))
            player = self.rng.choice(sorted(floor - goals))
            walls = grid - floor
            start = self._pull_boxes(floor, goals, player)
            if start is None:
                continue
            boxes, at, moves = start
            # the backward play is a solution of `moves` moves; the search measures the
            # shortest one, unless it runs out of budget (a level that hard is kept as is)
            plan = shortest_solution(walls, goals, boxes, at, max_moves=moves, max_expansions=_SEARCH_BUDGET)
            length = moves if plan is None else len(plan)
            if best is None or length > best[0]:
                best = (length, walls, goals, boxes, at)
            # stop at a level that takes a quarter of the turn limit, or the best of a few rooms
            if best[0] >= self.max_turns // 4 or attempt >= _ROOMS_FOR_HARDER:
                break
        if best is None:
            # only a room too small for its boxes gets here (the presets never do)
            raise RuntimeError(
                f"could not build a Sokoban level with {self.num_boxes} boxes in a {self.dim_room} room; "
                "use a bigger room or fewer boxes"
            )
        self.optimal_moves, self.walls, self.goals, self.boxes, self.player = best

    def _rooms(self) -> Iterator[set[Cell]]:
        """Floors to build a level in, all drawn from ``self.rng`` (so a seed still fixes
        the level): carved rooms, then open ones. A carved room often cannot take the
        boxes (too few cells to pull a box from), so a few seeds need many rooms: the
        random preset's seed 100233 needs 251, and failed its reset when 200 was the
        limit."""
        for _ in range(_CARVED_ROOMS):
            yield self._carve_room()
        rows, cols = self.dim_room
        for _ in range(_OPEN_ROOMS):
            yield {(r, c) for r in range(1, rows - 1) for c in range(1, cols - 1)}

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

    def _pull_boxes(self, floor: set[Cell], goals: set[Cell], player: Cell) -> tuple[set[Cell], Cell, int] | None:
        """Play backwards from the solved level: walk to a box, pull it a few cells, repeat,
        until every box is off the goals. Returns the boxes, the player and the number of
        moves (None if some box stays on a goal). Replayed forwards these moves solve
        the level, and there are never more than ``max_turns`` of them."""
        rng = self.rng
        boxes, at, used = set(goals), player, 0
        adjacent = _open_map(floor)
        rounds = rng.randint(self.num_boxes, 2 * self.num_boxes)
        for round_ in range(3 * self.num_boxes):
            stranded = sorted(boxes & goals)
            if not stranded and round_ >= rounds:
                break
            dist = _walk_distances(at, adjacent, frozenset(boxes))
            pulls = [(box, d) for box in (stranded or sorted(boxes)) for d in STEPS.values()
                     if _ahead(box, d, 1) in dist and _ahead(box, d, 2) in floor and _ahead(box, d, 2) not in boxes]
            if not pulls:
                break
            box, d = rng.choice(pulls)
            stand = _ahead(box, d, 1)
            if used + dist[stand] + 1 > self.max_turns:
                break
            used += dist[stand]
            at = stand
            for _ in range(rng.randint(1, 3)):
                behind = _ahead(at, d, 1)
                if behind not in floor or behind in boxes or used + 1 > self.max_turns:
                    break
                boxes.remove(box)
                boxes.add(at)
                box, at, used = at, behind, used + 1
        return None if boxes & goals else (boxes, at, used)

    def play(self, direction: str) -> str | Outcome:
        moved = push(self.walls, self.boxes, self.player, direction)
        if moved is None:
            return f"you cannot move {direction} (wall, or a box that cannot move)."
        pushed = moved[1] != self.boxes
        self.player, self.boxes = moved
        feedback = f"you moved {direction}" + (" and pushed a box." if pushed else ".")
        if self.boxes <= self.goals:
            return Outcome.win(f"{feedback} Every box is on a goal!\n\n{self._render()}")
        return feedback

    def last_turn_note(self) -> str:
        placed = len(self.boxes & self.goals)
        return f" That was the last turn: {placed} of {self.num_boxes} boxes are on goals.\n\n{self._render()}"

    def partial_credit(self) -> float:
        """The fraction of the boxes on goals."""
        return len(self.boxes & self.goals) / self.num_boxes

    def _render(self) -> str:
        return render_level(*self.dim_room, self.walls, self.goals, self.boxes, self.player)

    def task_suffix(self) -> str:
        return f"Board:\n{self._render()}\nTurns left: {self.turns_left}. Enter your move."

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {
            "dim_room": list(self.dim_room),
            "num_boxes": self.num_boxes,
            "walls": sorted(map(list, self.walls)),
            "goals": sorted(map(list, self.goals)),
            "boxes": sorted(map(list, self.boxes)),
            "player": list(self.player),
            "optimal_moves": self.optimal_moves,
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.dim_room = (state["dim_room"][0], state["dim_room"][1])
        self.num_boxes = state["num_boxes"]
        self.walls = {(r, c) for r, c in state["walls"]}
        self.goals = {(r, c) for r, c in state["goals"]}
        self.boxes = {(r, c) for r, c in state["boxes"]}
        self.player = (state["player"][0], state["player"][1])
        self.optimal_moves = state["optimal_moves"]


def _push_distances(walls: set[Cell], goals: set[Cell]) -> dict[Cell, int]:
    """For every cell from which a lone box can still reach one of ``goals``, the fewest
    pushes it needs; cells missing from the map are dead for those goals."""
    dist = {g: 0 for g in goals}
    queue = deque(goals)
    while queue:
        cell = queue.popleft()
        for dr, dc in STEPS.values():
            # a box at `prev` pushed towards `cell` needs the player at `prev + d`
            prev, stand = (cell[0] - dr, cell[1] - dc), (cell[0] - 2 * dr, cell[1] - 2 * dc)
            if prev not in dist and prev not in walls and stand not in walls:
                dist[prev] = dist[cell] + 1
                queue.append(prev)
    return dist


def shortest_solution(
    walls: set[Cell],
    goals: set[Cell],
    boxes: set[Cell],
    player: Cell,
    max_moves: int | None = None,
    max_expansions: int | None = None,
) -> list[str] | None:
    """A shortest move list that puts every box on a goal, or None if there is none
    within ``max_moves`` (or none found in ``max_expansions`` positions).

    A* over pushes, each costed by the walk to it plus one move, guided by the fewest
    pushes that bring the boxes onto distinct goals (never an overestimate, so the
    first solution found is a shortest one). ``walls`` must enclose the level.

    >>> shortest_solution({(0, c) for c in range(5)} | {(2, c) for c in range(5)} | {(1, 0), (1, 4)},
    ...                   goals={(1, 3)}, boxes={(1, 2)}, player=(1, 1))
    ['right']
    """
    pushes_left = _push_distances(walls, goals)
    if any(b not in pushes_left for b in boxes) or len(boxes) > len(goals):
        return None
    estimate = _matching_estimate(walls, goals)
    adjacent = _floor_map(player, walls)
    start = (player, frozenset(boxes))
    # state -> (previous state, the push that led here as (stand cell, direction))
    came_from: dict[tuple[Cell, frozenset[Cell]], Any] = {start: None}
    best_g = {start: 0}
    tie = itertools.count()
    frontier = [(estimate(start[1]), 0, next(tie), start)]
    while frontier:
        _, minus_g, _, state = heapq.heappop(frontier)
        g = -minus_g
        if g > best_g[state]:
            continue
        if max_expansions is not None:
            max_expansions -= 1
            if max_expansions < 0:
                return None
        at, placed = state
        if placed <= goals:
            return _replay(came_from, state, walls)
        walk = _walk_distances(at, adjacent, placed)
        for box in placed:
            for direction, (dr, dc) in STEPS.items():
                stand, target = (box[0] - dr, box[1] - dc), (box[0] + dr, box[1] + dc)
                if stand not in walk or target in placed or target not in pushes_left:
                    continue
                new_g = g + walk[stand] + 1
                child = (box, (placed - {box}) | {target})
                if new_g >= best_g.get(child, 1 << 30):
                    continue
                new_h = estimate(child[1])
                if max_moves is not None and new_g + new_h > max_moves:
                    continue
                best_g[child] = new_g
                came_from[child] = (state, stand, direction)
                # among equal estimates, the deepest first: it is closer to a solution
                heapq.heappush(frontier, (new_g + new_h, -new_g, next(tie), child))
    return None


def _matching_estimate(walls: set[Cell], goals: set[Cell]) -> Any:
    """``estimate(boxes)``: the fewest pushes that move the boxes onto distinct goals,
    each box alone on the board (a lower bound on the moves left); cached per set."""
    per_goal = [_push_distances(walls, {g}) for g in sorted(goals)]
    unreachable = 1 << 20
    cache: dict[frozenset[Cell], int] = {}
    # (goal index, pushes) for every goal a box on this cell can reach
    reach: dict[Cell, list[tuple[int, int]]] = {}
    for i, dist in enumerate(per_goal):
        for cell, pushes in dist.items():
            reach.setdefault(cell, []).append((1 << i, pushes))

    def estimate(boxes: frozenset[Cell]) -> int:
        if boxes in cache:
            return cache[boxes]
        # assignment by dynamic programming over the set of goals already taken
        best = {0: 0}
        for box in boxes:
            following: dict[int, int] = {}
            for taken, total in best.items():
                for bit, cost in reach.get(box, ()):
                    if not taken & bit:
                        key = taken | bit
                        if total + cost < following.get(key, unreachable):
                            following[key] = total + cost
            best = following
        cache[boxes] = value = min(best.values(), default=unreachable)
        return value

    return estimate


def _ahead(cell: Cell, step: tuple[int, int], times: int) -> Cell:
    return (cell[0] + times * step[0], cell[1] + times * step[1])


def _open_map(floor: set[Cell]) -> dict[Cell, list[Cell]]:
    """Each floor cell with its floor neighbours."""
    return {cell: [n for d in STEPS.values() if (n := _ahead(cell, d, 1)) in floor] for cell in floor}


def _floor_map(start: Cell, walls: set[Cell]) -> dict[Cell, list[Cell]]:
    """The open cells reachable from ``start`` (ignoring boxes), each with its open neighbours."""
    adjacent: dict[Cell, list[Cell]] = {}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell in adjacent:
            continue
        adjacent[cell] = [n for dr, dc in STEPS.values() if (n := (cell[0] + dr, cell[1] + dc)) not in walls]
        queue.extend(n for n in adjacent[cell] if n not in adjacent)
    return adjacent


def _walk_distances(player: Cell, adjacent: dict[Cell, list[Cell]], boxes: frozenset[Cell]) -> dict[Cell, int]:
    """Walking distance (without pushing) from ``player`` to every reachable cell."""
    dist = {player: 0}
    frontier = [player]
    d = 0
    while frontier:
        d += 1
        following = []
        for cell in frontier:
            for nxt in adjacent[cell]:
                if nxt not in dist and nxt not in boxes:
                    dist[nxt] = d
                    following.append(nxt)
        frontier = following
    return dist


def _walk_route(start: Cell, end: Cell, walls: set[Cell], boxes: frozenset[Cell]) -> list[str]:
    """A shortest walking route from ``start`` to ``end`` (which must be reachable)."""
    back: dict[Cell, tuple[Cell, str] | None] = {start: None}
    queue = deque([start])
    while end not in back:
        cell = queue.popleft()
        for direction, (dr, dc) in STEPS.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt not in back and nxt not in walls and nxt not in boxes:
                back[nxt] = (cell, direction)
                queue.append(nxt)
    route: list[str] = []
    while back[end] is not None:
        end, direction = back[end]
        route.append(direction)
    return route[::-1]


def _replay(came_from: dict[Any, Any], state: Any, walls: set[Cell]) -> list[str]:
    """The moves along the chain of pushes that ends in ``state``."""
    segments = []
    while came_from[state] is not None:
        previous, stand, direction = came_from[state]
        segments.append([*_walk_route(previous[0], stand, walls, previous[1]), direction])
        state = previous
    return [move for segment in reversed(segments) for move in segment]


def register(registry: Any) -> None:
    """Register GEM's Sokoban ids."""
    entry = "gem_envs_games.sokoban:SokobanEnv"
    registry.register("game:Sokoban-v0", entry)
    registry.register("game:Sokoban-v0-easy", entry, dim_room=(6, 6), num_boxes=2, max_turns=20)
    registry.register("game:Sokoban-v0-hard", entry, dim_room=(8, 8), num_boxes=4, max_turns=50)
    registry.register("game:Sokoban-v0-random", entry, dim_room=None, num_boxes=None, max_turns=None)
