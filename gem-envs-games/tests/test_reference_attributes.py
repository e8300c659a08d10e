"""The reference package's attribute names on our games (issue 34, point 7).

The reference's own FifteenPuzzle tests read ``env.board``, ``env.blank_pos``, ``env.turn_count`` and call
``env._move``, ``env._get_empty_position``, ``env._is_solvable`` and ``env._generate_goal_board``; with ours four of
its cases stopped at AttributeError. The same behaviours, checked here with our own code, then the reference's
names on every game that keeps that state under another name: views of our state, never a copy, and where the
reference's users assign them (a board, a player's cell, guesses already made) the game plays on from what was
assigned. Every test here fails on 1d88a9a (the names did not exist); two pin faults of the first version of these
views: an assigned Mastermind ``previous_guesses`` that the repeat check did not see, and a Minesweeper
``first_reveal`` that stayed true after the first reveal of a board without mines.
"""

from __future__ import annotations

from collections import deque
from copy import deepcopy

import pytest

import gem
from gem_envs_games.fifteen_puzzle import FifteenPuzzleEnv

GOAL = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, None]]
NOT_GOAL = [[1, 2, 3, 4], [5, 6, 7, 8], [9, None, 11, 12], [13, 10, 14, 15]]


def classic() -> FifteenPuzzleEnv:
    return FifteenPuzzleEnv(max_turns=100, num_rows=4, init_algo="monte_carlo", mc_rand_moves=20)


def put(env: FifteenPuzzleEnv, board, turns: int = 0) -> None:
    """What the reference's tests do to fix a position: reset, then assign the board and the counters."""
    env.reset()
    env.board = deepcopy(board)
    env.blank_pos = env._get_empty_position()
    env.turn_count = turns


def test_the_goal_board_and_the_empty_cell():
    env = classic()
    put(env, env._generate_goal_board())
    assert env.board == GOAL and env.goal_board == GOAL
    assert env._get_empty_position() == (3, 3) == env.blank_pos
    assert env.greatest_num == 15 and env._is_solved()


@pytest.mark.parametrize(("move", "expected"), [
    ("down", [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, None], [13, 14, 15, 12]]),
    ("right", [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, None, 15]]),
])
def test_a_step_from_the_goal_moves_one_tile(move, expected):
    env = classic()
    put(env, GOAL)
    env.step(rf"\\boxed{{{move}}}")  # the reference's tests send the raw string r'\\boxed{down}'
    assert env.board == expected
    assert sum(cell is None for row in env.board for cell in row) == 1
    assert env.turn_count == 1


@pytest.mark.parametrize("move", ["up", "left"])
def test_moves_with_no_tile_to_slide_are_invalid(move):
    env = classic()
    put(env, GOAL)
    assert env._move(move) is False and env.board == GOAL


@pytest.mark.parametrize(("move", "delta"), [("up", (1, 0)), ("down", (-1, 0)), ("left", (0, 1)), ("right", (0, -1))])
def test_every_move_from_an_inner_gap_is_valid_and_moves_it(move, delta):
    env = classic()
    put(env, NOT_GOAL)
    env.blank_pos = (2, 1)
    assert env._move(move) is True
    assert env._get_empty_position() == (2 + delta[0], 1 + delta[1])


def test_solvability():
    env = classic()
    assert env._is_solvable([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, None, 15]])
    assert not env._is_solvable([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 15, 14, None]])


def _distance_to_goal(board) -> int:
    """Fewest slides from ``board`` to the goal (breadth-first; boards of 3x3 or less)."""
    rows = len(board)
    start = tuple(cell or 0 for row in board for cell in row)
    goal = (*range(1, rows * rows), 0)
    seen, todo = {start}, deque([(start, 0)])
    while todo:
        tiles, depth = todo.popleft()
        if tiles == goal:
            return depth
        gap = tiles.index(0)
        r, c = divmod(gap, rows)
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            if 0 <= r + dr < rows and 0 <= c + dc < rows:
                nxt = list(tiles)
                src = (r + dr) * rows + c + dc
                nxt[gap], nxt[src] = nxt[src], 0
                if tuple(nxt) not in seen:
                    seen.add(tuple(nxt))
                    todo.append((tuple(nxt), depth + 1))
    raise AssertionError("unsolvable board")


@pytest.mark.parametrize("init_algo", ["monte_carlo", "pure_random"])
def test_generated_boards_are_valid_and_solvable(init_algo):
    env = FifteenPuzzleEnv(max_turns=30, num_rows=3, init_algo=init_algo, mc_rand_moves=12)
    for seed in range(6):
        env.reset(seed=seed)
        board = env.board
        assert sorted(cell or 0 for row in board for cell in row) == list(range(9))
        assert env._is_solvable(board) and not env._is_solved()
        if init_algo == "monte_carlo":
            assert _distance_to_goal(board) <= 12


def test_assigning_a_board_that_is_not_one_is_refused():
    env = classic()
    env.reset()
    with pytest.raises(ValueError, match="tiles 1 to 15"):
        env.board = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 14, None]]


@pytest.mark.parametrize(("env_id", "names"), [
    ("game:GuessTheNumber-v0-easy", {"game_number": "secret", "previous_guesses": "guesses"}),
    ("game:Hangman-v0-easy", {"secret_word": "secret", "guessed_letters": "guessed"}),
    ("game:Mastermind-v0-easy", {"game_code": "code", "previous_guesses": "guesses"}),
    ("game:Wordle-v0-easy", {"secret_word": "secret", "previous_guesses": "guesses"}),
    ("game:Game2048-v0-easy", {"max_tile_achieved": "best", "init_max_tile_achieved": "start_max"}),
    ("game:Sudoku-v0-easy", {"full_grid": "solution", "init_num_empty": "empty_at_start"}),
    ("game:TowerofHanoi-v0-easy", {"board": "towers"}),
])
def test_every_game_answers_to_the_references_names(env_id, names):
    env = gem.make(env_id).unwrapped
    env.reset(seed=3)
    env.step(env.sample_random_action())
    assert env.turn_count == env.turn == 1
    for theirs, ours in names.items():
        value, own = getattr(env, theirs), getattr(env, ours)
        if isinstance(value, set):  # the reference keeps guesses in sets
            assert value == {tuple(g) if isinstance(g, list) else g for g in own}
        else:
            assert value == own
    env.turn_count = 0  # the reference's tests assign it
    assert env.turn == 0



GAME_IDS = [env_id for env_id in gem.list_envs("game:*") if env_id.endswith("-easy")]


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_every_game_gives_its_suffix_by_the_references_method(env_id):
    """Scripts written against the reference call ``env.get_task_suffix()``; ours named it task_suffix."""
    env = gem.make(env_id).unwrapped
    _obs, info = env.reset(seed=1)
    assert env.get_task_suffix() == info["suffix"] != ""
    _obs, _reward, terminated, _truncated, info = env.step(env.sample_random_action())
    if not terminated:
        assert env.get_task_suffix() == info["suffix"]


def test_hangman_board_and_word_pool():
    env = gem.make("game:Hangman-v0-easy").unwrapped
    env.reset(seed=5)
    assert env.board == ["_"] * len(env.secret_word)
    letter = env.secret_word[0]
    env.step(f"\\boxed{{{letter}}}")
    assert env.board == [ch if ch == letter else "_" for ch in env.secret_word]
    assert env.guessed_letters == {letter}
    pool = env.available_words
    assert env.secret_word.lower() in pool and {len(w) for w in pool} == {env.word_length}


def test_mastermind_milestone_and_assigned_guesses_are_the_games():
    """Assigning ``previous_guesses`` once set the list but not the set the repeat check reads, so a guess
    assigned as already made still scored (and won): both change together now."""
    env = gem.make("game:Mastermind-v0-easy").unwrapped
    env.reset(seed=2)
    code = list(env.game_code)
    env.previous_guesses = {tuple(code)}
    obs, reward, terminated, *_ = env.step(f"\\boxed{{{' '.join(map(str, code))}}}")
    assert "already guessed" in obs and reward == 0.0 and not terminated
    assert env.milestone == 0
    env.previous_guesses = set()
    wrong_last = [*code[:-1], next(d for d in range(1, env.num_numbers + 1) if d != code[-1] and d not in code)]
    env.step(f"\\boxed{{{' '.join(map(str, wrong_last))}}}")
    assert env.milestone == env.best_black == len(code) - 1
    assert env.previous_guesses == {tuple(wrong_last)}


def test_wordle_milestones_and_word_pool():
    env = gem.make("game:Wordle-v0-easy").unwrapped
    env.reset(seed=4)
    secret = env.secret_word
    assert env.milestones == [0] * len(secret) and secret.lower() in env.available_words
    guess = next(w for w in env.available_words if w[0] == secret[0].lower() and w.upper() != secret).upper()
    _obs, reward, *_ = env.step(f"\\boxed{{{guess}}}")
    assert env.milestones[0] == 1 and env.milestones == [int(g) for g in env.greens] and reward > 0
    # assigned milestones count as reached, as in the reference: the same greens earn nothing again
    env.reset(seed=4)
    env.milestones = [1] * len(secret)
    _obs, reward, *_ = env.step(f"\\boxed{{{guess}}}")
    assert reward == 0.0 and env.greens == [True] * len(secret)


@pytest.mark.parametrize("num_mines", [5, 0])
def test_minesweeper_grid_and_first_reveal(num_mines):
    from gem_envs_games.minesweeper import MinesweeperEnv

    env = MinesweeperEnv(rows=5, cols=5, num_mines=num_mines, max_turns=25)
    env.reset(seed=0)
    assert env.first_reveal and env.grid == [[0] * 5 for _ in range(5)]
    env.step("\\boxed{flag 4 4}")
    assert env.first_reveal  # a flag lays no mines
    env.step("\\boxed{flag 4 4}")
    env.step("\\boxed{reveal 0 0}")
    assert not env.first_reveal and env.grid is env.counts
    assert sum(cell == -1 for row in env.grid for cell in row) == num_mines
    assert env.revealed[0][0] and not any(map(any, env.flags))


def test_word_search_words_cells_and_attempts():
    env = gem.make("game:WordSearch-v0-easy").unwrapped
    env.reset(seed=3)
    placed = env.placed_words
    assert sorted(placed) == sorted(env.targets) and env.game_board is env.grid
    assert all(word.lower() in env.word_list for word in placed)
    spans = {}
    for word, (row, col, way) in placed.items():
        cells = [(row + i, col) if way == "down" else (row, col + i) for i in range(len(word))]
        assert "".join(env.game_board[r][c] for r, c in cells) == word
        spans[word] = (*cells[0], *cells[-1]), set(cells)
    first, second = list(placed)[:2]
    env.step(f"\\boxed{{{' '.join(map(str, spans[first][0]))}}}")
    assert env.correct_words == {first} and env.highlighted_positions == spans[first][1]
    assert env.attempts == [spans[first][0]]
    # an assigned attempt is one the game has seen: guessing it again wastes the turn
    env.attempts = [spans[first][0], spans[second][0]]
    obs, reward, *_ = env.step(f"\\boxed{{{' '.join(map(str, spans[second][0]))}}}")
    assert "already tried" in obs and reward == 0.0 and env.correct_words == {first}


def test_crosswords_clues_placements_and_cell_count():
    env = gem.make("game:Crosswords-v0-easy").unwrapped
    env.reset(seed=6)
    placed, clues = env.placed_words, env.clues
    assert sorted(placed) == sorted(clues) == sorted(w[0] for w in env.words) and all(clues.values())
    for word, (row, col, way) in placed.items():
        cells = [(row + i, col) if way == "down" else (row, col + i) for i in range(len(word))]
        assert "".join(env.solution[r][c] for r, c in cells) == word
    assert env.total_letter_cells == sum(cell != "." for row in env.board for cell in row)
    word, (row, col, _way) = next(iter(placed.items()))
    _obs, reward, *_ = env.step(f"\\boxed{{{row} {col} {word[0]}}}")
    assert reward == pytest.approx(1 / env.total_letter_cells) and env.board[row][col] == word[0]


def test_sokoban_room_arrays_and_a_placed_player():
    env = gem.make("game:Sokoban-v0-easy").unwrapped
    env.reset(seed=7)
    state, fixed = env.room_state, env.room_fixed
    assert state.shape == fixed.shape == env.dim_room

    def cells(mask):
        return {(int(r), int(c)) for r, c in zip(*mask.nonzero())}

    assert cells(fixed == 0) == env.walls and cells(fixed == 2) == env.goals
    assert cells((state == 3) | (state == 4)) == env.boxes and cells(state == 3) == env.boxes & env.goals
    assert cells(state == 5) == {env.player} == {tuple(env.player_position)}
    assert env.action_space == ["up", "down", "left", "right"]
    # put the player on another free cell with a free cell beside it, then step from there, as the
    # reference's player_position would
    free = {(r, c) for r in range(env.dim_room[0]) for c in range(env.dim_room[1])} - env.walls - env.boxes
    steps = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    cell, move, to = next((cell, move, (cell[0] + dr, cell[1] + dc)) for cell in sorted(free - {env.player})
                          for move, (dr, dc) in steps.items() if (cell[0] + dr, cell[1] + dc) in free)
    env.player_position = list(cell)
    assert env.room_state[cell] == 5 and env.player == cell
    env.step(f"\\boxed{{{move}}}")
    assert tuple(env.player_position) == to
    with pytest.raises(ValueError, match="cannot stand"):
        env.player_position = next(iter(env.walls))


@pytest.fixture(scope="module")
def small_wiki(tmp_path_factory):
    """Four pages whose ids are not their titles (``Start_page`` is "Start page"), one a dead end."""
    from gem_envs_games.wikigame_zim import write_zim

    articles = {
        "Start_page": ("Start page", "Where the walk starts.", ["Middle"]),
        "Middle": ("Middle", "Halfway there.", ["Start_page", "Goal", "Dead_end"]),
        "Goal": ("Goal", "The end of the walk.", ["Middle"]),
        "Dead_end": ("Dead end", "A page that links nowhere.", []),
    }
    return write_zim(tmp_path_factory.mktemp("wiki") / "small.zim", articles, main="Start_page")


def test_wikigame_fixed_pages_and_page_objects(small_wiki):
    """The reference's WikiGame tests' steps on pages of our own: a fixed start and target, a move, a bogus
    page, a dead end that bounces back at the cost of a turn, and no going back right after."""
    from gem_envs_games.wikigame import WikiGameEnv

    env = WikiGameEnv(max_turns=10, zim_path=small_wiki, variant="oneback")
    assert env.current_page is None  # before any episode
    env._reset_fixed_page("Start page", "Goal")
    assert (env.current_page.title, env.start_page.title, env.target_page.title) == ("Start page", "Start page", "Goal")
    assert env.turn_count == 0 and not env.backtracked and env.trawler is env.wiki
    env.step("\\boxed{I Think I Am A Wikipedia Page}")
    assert env.current_page.title == "Start page"
    env.step("\\boxed{Middle}")
    assert env.current_page.title == "Middle" and [p.title for p in env.page_history] == ["Start page", "Middle"]
    assert env.current_page.links == ["Start_page", "Goal", "Dead_end"]
    env.step("\\boxed{Dead_end}")
    assert env.current_page.title == "Middle" and env.backtracked and env.turn_count == 4
    env.step("\\boxed{<PREV_PAGE>}")
    assert env.current_page.title == "Middle"
    _obs, reward, terminated, *_ = env.step("\\boxed{Goal}")
    assert reward == 1.0 and terminated and env.current_page == env.target_page
    # the next plain reset draws pages again; an unknown title is named
    env.reset(seed=0)
    assert env.start_page.page_id == env.start
    with pytest.raises(ValueError, match="no page 'Nowhere'"):
        env._reset_fixed_page("Nowhere", "Goal")
    assert (env.page_summary_length, env.page_summary_length_unit) == (100, "characters")
