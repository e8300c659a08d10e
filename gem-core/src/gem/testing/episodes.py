"""Scripted episodes for tests: the return of a fixed list of actions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def scripted_return(env: Any, actions: Iterable[str], **reset_kwargs: Any) -> float:
    """Reset ``env`` (with ``reset_kwargs``), play ``actions`` until the episode ends, and
    return the sum of the rewards; actions after the end are not played.

    >>> import gem
    >>> scripted_return(gem.make("test:Count-v0"), ["\\\\boxed{0}"], seed=0)  # doctest: +SKIP
    0.0
    """
    env.reset(**reset_kwargs)
    total = 0.0
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return total
