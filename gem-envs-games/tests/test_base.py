"""The shared turn-game flow (gem_envs_games.base), on a tiny game and on every registered game."""

from __future__ import annotations

from typing import Any

import pytest

import gem
from gem.wrappers import HistoryWrapper
from gem_envs_games.base import NO_EPISODE, DirectionGame, Outcome, TurnGame, at_least


class Counter(TurnGame):
    """Reach ``goal`` by adding the boxed numbers; 0 loses, negatives are invalid."""

    format_error = "no number found in \\boxed{}."

    def __init__(self, max_turns: int = 3, goal: int = 5) -> None:
        self.max_turns, self.goal, self.total = max_turns, goal, 0

    def new_episode(self) -> str:
        self.total = 0
        self.salt = self.rng.random()  # the episode draws from the env's stream
        return f"Reach {self.goal}."

    def parse_move(self, boxed: str) -> int | None:
        return int(boxed) if boxed.strip().lstrip("-").isdigit() else None

    def play(self, move: int) -> Outcome:
        if move < 0:
            return Outcome("negative; the turn is lost.")
        if move == 0:
            return Outcome.loss("zero. You lose.", 0.25)
        self.total += move
        if self.total >= self.goal:
            return Outcome.win("done! You win.")
        return Outcome(f"total {self.total}.", 0.1)

    def task_suffix(self) -> str:
        return f"Total: {self.total}. Turns left: {self.turns_left}."

    def last_turn_note(self) -> str:
        return f" Out of turns at {self.total}."

    def partial_credit(self) -> float:
        return self.total / self.goal

    def game_state(self) -> dict[str, Any]:
        return {"goal": self.goal, "total": self.total, "salt": self.salt}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.goal, self.total, self.salt = state["goal"], state["total"], state["salt"]


def test_reset_shows_the_rules_and_puts_the_board_in_the_suffix():
    env = Counter()
    assert env.step("\\boxed{1}") == (NO_EPISODE, 0.0, True, False, {})
    assert env.reset(seed=0) == ("Reach 5.", {"suffix": "Total: 0. Turns left: 3."})


def test_a_move_reports_its_turn_and_the_suffix_shows_the_board():
    env = Counter()
    env.reset(seed=0)
    assert env.step("\\boxed{2}") == (
        "Turn 1: total 2.",
        0.1,
        False,
        False,
        {"suffix": "Total: 2. Turns left: 2.", "format_error": False},
    )
    assert env.step("I say \\boxed{-1}") == (
        "Turn 2: negative; the turn is lost.",
        0.0,
        False,
        False,
        {"suffix": "Total: 2. Turns left: 1.", "format_error": False},
    )


def test_win_and_loss_end_the_episode_before_the_limit():
    env = Counter()
    env.reset(seed=0)
    assert env.step("\\boxed{9}") == (
        "Turn 1: done! You win.",
        1.0,
        True,
        False,
        {"suffix": "", "correct": True, "format_error": False},
    )
    assert env.step("\\boxed{1}") == (NO_EPISODE, 0.0, True, False, {})
    env.reset(seed=0)
    assert env.step("\\boxed{0}") == (
        "Turn 1: zero. You lose.",
        0.25,
        True,
        False,
        {"suffix": "", "correct": False, "format_error": False},
    )


def test_the_last_turn_adds_the_note_and_the_partial_credit():
    env = Counter(max_turns=2)
    env.reset(seed=0)
    env.step("\\boxed{1}")
    obs, reward, terminated, truncated, info = env.step("\\boxed{2}")
    assert obs == "Turn 2: total 3. Out of turns at 3."
    assert reward == pytest.approx(0.1 + 3 / 5)
    assert (terminated, truncated, info) == (True, True, {"suffix": "", "correct": False, "format_error": False})


@pytest.mark.parametrize("action", ["no box", "\\boxed{two}", "\\boxed{1", None, 7])
def test_a_format_error_ends_the_episode(action):
    env = Counter()
    env.reset(seed=0)
    expected = "Turn 1: no number found in \\boxed{}. The game is over."
    assert env.step(action) == (expected, -0.1, True, False, {"suffix": "", "correct": False, "format_error": True})
    assert env.done


def test_a_format_error_on_the_last_turn_is_also_truncated():
    env = Counter(max_turns=1)
    env.reset(seed=0)
    assert env.step("nothing")[1:4] == (-0.1, True, True)


def test_state_round_trip_keeps_turn_done_and_rng():
    env = Counter()
    env.reset(seed=3)
    env.step("\\boxed{2}")
    state = env.get_state()
    assert {"max_turns", "turn", "done", "rng", "total"} <= state.keys()
    later = [env.step("\\boxed{1}"), env.reset()]
    env.set_state(state)
    assert env.turn == 1 and not env.done
    assert [env.step("\\boxed{1}"), env.reset()] == later


def test_at_least_accepts_none_and_the_minimum():
    at_least("max_turns", None, 1)
    at_least("max_turns", 1, 1)
    with pytest.raises(ValueError, match="num_rows must be at least 2, got 1"):
        at_least("num_rows", 1, 2)


GAME_IDS = [env_id for env_id in gem.list_envs("game:*") if env_id.endswith("-easy")]


def test_every_game_has_an_easy_preset():
    assert len(GAME_IDS) == 13  # the twelve families and WikiGame


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_every_game_runs_on_the_shared_flow(env_id):
    env = gem.make(env_id)
    game = env.unwrapped
    assert isinstance(game, TurnGame)
    env.reset(seed=0)
    assert env.step("no box") == (
        f"Turn 1: {type(game).format_error} The game is over.",
        -0.1,
        True,
        False,
        {"suffix": "", "correct": False, "format_error": True},
    )
    assert env.step(env.sample_random_action())[0] == NO_EPISODE


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_only_a_format_error_sets_the_format_error_flag(env_id):
    env = gem.make(env_id)
    env.reset(seed=0)
    for _ in range(env.unwrapped.max_turns):
        obs, reward, terminated, truncated, info = env.step(env.sample_random_action())
        assert info["format_error"] is False, obs
        if terminated or truncated:
            break
    env.reset(seed=1)
    assert env.step("no box")[4]["format_error"] is True


@pytest.mark.parametrize("env_id", [i for i in GAME_IDS if "2048" in i or "Fifteen" in i or "Sokoban" in i])
def test_direction_games_read_any_case_and_spacing(env_id):
    env = gem.make(env_id)
    game = env.unwrapped
    assert isinstance(game, DirectionGame)
    env.reset(seed=0)
    assert [game.parse_move(text) for text in (" UP ", "Left", "north", "up left")] == ["up", "left", None, None]
    assert game.parse_move(env.sample_random_action()[len("\\boxed{") : -1]) in game.directions


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_the_board_is_in_the_suffix_and_history_reads_as_the_reference(env_id):
    """As in the reference package: the observation is the rules, then each move's
    feedback; ``info["suffix"]`` holds the board as it is now and the prompt, so a
    history wrapper shows every feedback once and the board once, at the end."""
    env = gem.make(env_id)
    rules, info = env.reset(seed=0)
    assert info["suffix"] and info["suffix"] not in rules
    action = env.sample_random_action()
    feedback, _, terminated, truncated, step_info = env.step(action)
    assert feedback.startswith("Turn 1: ")
    assert step_info["suffix"] == ("" if terminated or truncated else env.unwrapped.task_suffix())

    wrapped = HistoryWrapper(gem.make(env_id), mode="concat_with_action")
    assert wrapped.reset(seed=0)[0] == f"{rules}\n{info['suffix']}"
    shown = wrapped.step(action)[0]
    assert shown == f"{rules}\n{action}\n{feedback}\n{step_info['suffix']}"
