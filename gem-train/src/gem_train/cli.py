"""The Hydra app behind ``gem-train``, ``gem train`` and ``python -m gem_train``.

``main`` only turns the composed config into a :class:`~gem_train.config.TrainConfig`
and calls :func:`gem_train.trainer.train`::

    gem-train                                   # the default run: GuessTheNumber, tiny model, SFT then ReBN
    gem-train algo=grpo rollout=vllm trainer.iterations=50
    gem-train --cfg job                         # print the composed config
    torchrun --nproc_per_node 2 -m gem_train    # data-parallel learners (README: Distributed learner)
"""

from __future__ import annotations

import os
import sys
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from gem_train.config import ConfigError, TrainConfig, check_model_path, register_configs, validate

register_configs()


def to_train_config(cfg: DictConfig | Any) -> TrainConfig:
    """The typed config of a composed Hydra config (interpolations resolved), validated."""
    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, TrainConfig):
        raise ConfigError(f"the composed config is not a TrainConfig (got {type(obj).__name__}); "
                          "config.yaml must list gem_train_schema first in its defaults")
    validate(obj)
    return obj


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def _app(cfg: DictConfig) -> None:
    from gem_train.trainer import train

    try:
        train_cfg = to_train_config(cfg)
        check_model_path(train_cfg)
    except ConfigError as exc:
        raise SystemExit(f"gem-train: bad config: {exc}") from None
    train(train_cfg)


def rank_overrides() -> list[str]:
    """Hydra overrides of a torchrun rank other than 0: it leaves the run folder's ``hydra/`` and
    ``gem-train.log`` to rank 0 and logs to stdout, so no two processes write one file.

    >>> rank_overrides() if "RANK" not in os.environ else []
    []
    """
    if os.environ.get("RANK", "0") == "0":
        return []
    return ["hydra.output_subdir=null", "hydra/job_logging=stdout"]


def main() -> None:
    """Console script ``gem-train``: Hydra parses ``sys.argv``."""
    sys.argv = [*sys.argv, *rank_overrides()]
    _app()


def run(argv: list[str]) -> int:
    """Run the app on ``argv`` (what follows ``gem train``); returns the exit status."""
    saved = sys.argv
    sys.argv = ["gem-train", *argv, *rank_overrides()]
    try:
        _app()
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 1
        return int(exc.code or 0)
    finally:
        sys.argv = saved
    return 0
