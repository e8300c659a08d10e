"""Every task is solvable (its solver scores 1 through the real env and sandbox) and not solved by
doing nothing."""

from __future__ import annotations

import pytest

import gem
from gem_envs_terminal.task_set import load_all
from gem_envs_terminal.tasks import CATEGORIES

TASKS = load_all()


def test_the_task_set():
    assert len(TASKS) >= 30
    by_category = {c: [t for t in TASKS.values() if t.category == c] for c in CATEGORIES}
    assert all(len(ts) >= 7 for ts in by_category.values()), {c: len(ts) for c, ts in by_category.items()}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_solver_scores_one_and_doing_nothing_scores_zero(name):
    env = gem.make("terminal:Shell-v0", task=name)
    for seed in (0, 1, 2):
        obs, info = env.reset(seed=seed)
        assert info["task"] == name
        for action in env.solution():
            obs, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, info["correct"]) == (1.0, True, True), obs
    env.reset(seed=0)
    obs, reward, terminated, _tr, info = env.step("<finish></finish>")
    assert reward == 0.0 and terminated and not info["correct"]


def test_seeds_draw_different_files():
    env = gem.make("terminal:Shell-v0", task="sort_numbers")
    drawn = set()
    for seed in range(5):
        env.reset(seed=seed)
        drawn.add(env.workspace.text("numbers.txt"))
    assert len(drawn) == 5
