"""audit_answers of the guessing games: gem audit plays their secret as the right answer, and keeps a random
baseline (they give no wrong answer)."""

from __future__ import annotations

import pytest

import gem
from gem.audit import audit_env

IDS = ["game:GuessTheNumber-v0-hard", "game:GuessTheNumber-v0-random", "game:Mastermind-v0",
       "game:Mastermind-v0-random", "game:Hangman-v0", "game:Hangman-v0-random", "game:Wordle-v0",
       "game:Wordle-v0-random"]


@pytest.mark.parametrize("env_id", IDS)
def test_the_right_answer_wins_on_the_first_turn(env_id):
    env = gem.make(env_id)
    for seed in range(10):
        env.reset(seed=seed)
        right, wrong = env.audit_answers()
        assert wrong is None
        _, reward, terminated, _, info = env.step(right)
        assert terminated and info.get("correct") is True and reward > 0, (seed, right, info)


def test_a_game_that_knows_its_secret_keeps_a_random_baseline():
    """Pins the unfair baseline: a wrong guess every turn never wins by luck, so random guessing strategies
    (repeated, nested, tool_padded, code_*) "beat" it on GuessTheNumber-v0-hard (+0.009, 6 flagged when the
    game returned a wrong guess). With no wrong answer the baseline is random play and nothing is flagged."""
    result = audit_env("game:GuessTheNumber-v0-hard")
    assert result.baseline_name == "random answer"
    assert result.right_mean == 1.0
    assert result.flagged == []
