"""The scripted solvers win the word and logic games from observations alone, at known
rates over fixed seeds; a won episode's rewards add up to exactly 1.0."""

from __future__ import annotations

import pytest

import gem
from gem_envs_games.solvers import solver_for

#: id -> (seeded episodes, lowest acceptable win rate); measured rates are printed
FLOORS = {
    "game:GuessTheNumber-v0": (50, 1.0),
    "game:Crosswords-v0": (20, 1.0),
    "game:WordSearch-v0": (20, 1.0),
    "game:Mastermind-v0": (30, 0.95),
    "game:Wordle-v0": (20, 0.95),
    "game:Hangman-v0": (30, 0.9),
    # GEM's default gives 20 turns for 54 safe cells: wins need large openings
    "game:Minesweeper-v0": (40, 0.45),
    "game:GuessTheNumber-v0-easy": (100, 1.0),
    "game:GuessTheNumber-v0-hard": (100, 1.0),
    "game:GuessTheNumber-v0-random": (100, 1.0),
    "game:Crosswords-v0-easy": (30, 1.0),
    "game:Crosswords-v0-hard": (30, 1.0),
    "game:Crosswords-v0-random": (30, 1.0),
    "game:WordSearch-v0-easy": (30, 1.0),
    "game:WordSearch-v0-hard": (30, 1.0),
    "game:WordSearch-v0-random": (30, 1.0),
    "game:Mastermind-v0-easy": (50, 0.95),
    "game:Mastermind-v0-hard": (30, 0.95),
    "game:Mastermind-v0-random": (30, 0.95),
    "game:Wordle-v0-easy": (30, 0.95),
    "game:Wordle-v0-hard": (30, 0.95),
    "game:Wordle-v0-random": (30, 0.95),
    # 3-letter words leave many look-alikes (_AT: bat, cat, hat, ...) for 10 turns
    "game:Hangman-v0-easy": (60, 0.7),
    "game:Hangman-v0-hard": (30, 0.95),
    "game:Hangman-v0-random": (60, 0.85),
    # guesses are sometimes forced; these are close to what exact odds allow
    "game:Minesweeper-v0-easy": (60, 0.7),
    "game:Minesweeper-v0-hard": (40, 0.65),
    "game:Minesweeper-v0-random": (40, 0.55),
}


@pytest.mark.parametrize("env_id", sorted(FLOORS))
def test_solver_win_rate(env_id):
    episodes, floor = FLOORS[env_id]
    env = gem.make(env_id)
    solver = solver_for(env)
    wins = 0
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        solver.reset()
        rewards = []
        for _ in range(env.max_turns):
            obs, reward, terminated, truncated, info = env.step(solver.act(obs, info))
            rewards.append(reward)
            if terminated or truncated:
                break
        assert terminated or truncated, f"seed {seed}: the episode outlived max_turns"
        assert all(r >= 0 for r in rewards), f"seed {seed}: the solver made a format error"
        if info.get("correct"):
            wins += 1
            assert sum(rewards) == pytest.approx(1.0), f"seed {seed}: a win paid {sum(rewards)}"
    rate = wins / episodes
    print(f"{env_id}: solver won {wins}/{episodes} = {rate:.0%}")
    assert rate >= floor, f"{env_id}: solver won {rate:.0%} < {floor:.0%}"
