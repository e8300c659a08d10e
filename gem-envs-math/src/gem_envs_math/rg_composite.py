"""``rg:composite``: reasoning-gym's composite dataset (a weighted mix of datasets), offline.

The reference registers ``composite`` with no configuration, which reasoning-gym cannot
build; here the sub-datasets are named explicitly (``datasets=``: names, or dicts with
``name``, ``weight``, ``config``; default :data:`~gem_envs_math.rg_datasets.COMPOSITE_DEFAULT`).
Each item is scored by the sub-dataset it came from, in the supervised grading pool.

>>> env = gem.make("rg:composite", datasets=["leg_counting", {"name": "chain_sum", "weight": 2}])  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import reasoning_gym
from reasoning_gym.composite import DatasetSpec

from gem_envs_math import rg_env
from gem_envs_math.rg_datasets import COMPOSITE_DEFAULT


def _specs(datasets: Sequence[str | dict[str, Any]]) -> str:
    """The sub-datasets as canonical JSON (hashable, for the cache), checked against reasoning-gym."""
    specs = []
    for item in datasets:
        spec = {"name": item, "weight": 1.0, "config": {}} if isinstance(item, str) else {
            "name": item.get("name"), "weight": float(item.get("weight", 1.0)), "config": dict(item.get("config", {}))}
        if spec["name"] not in reasoning_gym.factory.DATASETS or spec["name"] == "composite":
            raise ValueError(f"rg:composite: {spec['name']!r} is not a reasoning-gym dataset")
        if spec["weight"] <= 0:
            raise ValueError(f"rg:composite: the weight of {spec['name']!r} must be positive")
        specs.append(spec)
    if not specs:
        raise ValueError("rg:composite needs at least one sub-dataset")
    return json.dumps(specs, sort_keys=True)


@functools.lru_cache(maxsize=64)
def _composite(specs: str, size: int, seed: int) -> Any:
    return reasoning_gym.create_dataset(
        "composite", size=size, seed=seed, datasets=[DatasetSpec(s["name"], s["weight"], s["config"]) for s in
                                                     json.loads(specs)])


class CompositeEnv(rg_env.ReasoningGymEnv):
    """A :class:`~gem_envs_math.rg_env.ReasoningGymEnv` over a composite of ``datasets``: the same epochs,
    ``idx``, state and scoring, with items drawn from the configured composite and each answer scored by the
    ``score_answer`` of the sub-dataset it came from (built with that dataset's default configuration)."""

    def __init__(self, datasets: Sequence[str | dict[str, Any]] = COMPOSITE_DEFAULT, size: int = 500,
                 seed: int = 42, format_error_reward: float = 0.0, grade_timeout: float | None = None) -> None:
        super().__init__("composite", size, seed, format_error_reward, grade_timeout)
        self.specs = _specs(list(datasets))

    def _item(self) -> dict[str, Any] | None:
        if self._current is None:
            return None
        return _composite(self.specs, self.size, self._current[0])[self._current[1]]

    def _source(self) -> str:
        return self.entry["metadata"]["source_dataset"]
