"""Helpers shared by the adapter tests (the fixtures live in conftest.py)."""

from __future__ import annotations

ENV_ID = "game:GuessTheNumber-v0-easy"


def secret_of(env_id: str, seed: int) -> int:
    """The number a seeded GuessTheNumber episode hides (the env's seeding makes it reproducible)."""
    import gem

    env = gem.make(env_id)
    env.reset(seed=seed)
    return env.unwrapped.secret
