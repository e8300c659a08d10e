"""The Hydra app behind ``gem-train``, ``gem train`` and ``python -m gem_train``.

``main`` only turns the composed config into a :class:`~gem_train.config.TrainConfig`
and calls :func:`gem_train.trainer.train`. Before Hydra runs it (and makes the run folder,
writes ``hydra/`` there and opens ``gem-train.log``), :func:`preflight` composes the same
config and checks it, so a bad config or a run folder holding another run's checkpoints
stops with one line on stderr and leaves nothing behind::

    gem-train                                   # the default run: GuessTheNumber, tiny model, SFT then ReBN
    gem-train algo=grpo rollout=vllm trainer.iterations=50
    gem-train --cfg job                         # print the composed config
    torchrun --nproc_per_node 2 -m gem_train    # data-parallel learners (README: Distributed learner)
"""

from __future__ import annotations

import os
import sys

import hydra
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from gem_train.config import ConfigError, register_configs, to_train_config

register_configs()


def _bad_config(exc: ConfigError) -> SystemExit:
    return SystemExit(f"gem-train: bad config: {exc}")


def preflight(overrides: list[str]) -> None:
    """Compose the config of ``overrides`` as the app will and run :func:`gem_train.trainer.check_run` on it;
    raises ``SystemExit`` with one line on a bad config.

    Hydra's own flags (``--cfg job``, ``--help``, ``--multirun``, another config) are left to Hydra, and so is a
    config that does not compose (Hydra reports it without making a folder); :func:`~gem_train.trainer.train`
    checks again in any case.
    """
    if any(arg.startswith("-") for arg in overrides):
        return
    from gem_train.config import compose_config
    from gem_train.trainer import check_run

    try:
        check_run(compose_config(overrides))
    except (HydraException, OmegaConfBaseException):
        return  # Hydra reports it as it composes (or resolves ``${hydra:...}``, which only the app can)
    except ConfigError as exc:
        raise _bad_config(exc) from None


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def _app(cfg: DictConfig) -> None:
    from gem.errors import DataUnavailableError
    from gem_train.trainer import OutOfDeviceMemory, train

    try:
        train(to_train_config(cfg))  # checks the config again: preflight leaves Hydra's flags alone
    except ConfigError as exc:
        raise _bad_config(exc) from None
    except OutOfDeviceMemory as exc:
        raise SystemExit(f"gem-train: {exc}") from None
    except DataUnavailableError as exc:
        # a dataset env whose data is not here (the paper presets' hub datasets): one line, not a traceback
        raise _bad_config(ConfigError(f"env.id: {cfg.env.id}: {exc} In gem-train the keyword arguments go in "
                                      "env.kwargs: ++env.kwargs.source=PATH")) from None


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
    preflight(sys.argv[1:])
    _app()


def run(argv: list[str]) -> int:
    """Run the app on ``argv`` (what follows ``gem train``); returns the exit status."""
    saved = sys.argv
    sys.argv = ["gem-train", *argv, *rank_overrides()]
    try:
        preflight(sys.argv[1:])
        _app()
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 1
        return int(exc.code or 0)
    finally:
        sys.argv = saved
    return 0
