"""Whether a config may continue the run its folder holds, and starting a folder over.

Each checkpoint's ``trainer_state.json`` records the composed config that wrote it. With
``trainer.resume`` (the default) a run folder holding a checkpoint continues from the newest
one, and only if the new config differs from the recorded one in the fields of
:data:`RESUMABLE` alone: those extend a run (``trainer.iterations``) or change how it is
watched and where it runs, never what it learns. Every other field defines the run, and a
change to one is refused with the fields named. A run that does not resume starts the folder
over.

>>> from gem_train.config import TrainConfig
>>> old, new = TrainConfig(), TrainConfig()
>>> new.trainer.iterations, new.env.id = 50, "game:Mastermind-v0-easy"
>>> changed_settings(config_record(old), config_record(new))
["env.id: 'game:GuessTheNumber-v0-easy' there, 'game:Mastermind-v0-easy' now"]
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from gem_train.checkpoint import latest_checkpoint, load_trainer_state
from gem_train.config import ConfigError, TrainConfig

#: fields (or whole sections) that a resumed run may change; the rest must match the checkpoint's config
RESUMABLE = (
    "trainer.iterations", "trainer.eval_every", "trainer.eval_episodes", "trainer.eval_temperature",
    "trainer.checkpoint_every", "trainer.resume", "trainer.device", "trainer.threads", "trainer.tensorboard",
    "trainer.wandb", "trainer.wandb_project", "trainer.distributed.backend", "trainer.distributed.timeout_minutes",
    "env.eval_ids", "model.hub_name", "rollout.concurrency", "rollout.batch_wait_ms", "rollout.vllm",
    "rollout.step_timeout", "rollout.episode_timeout", "rollout.processes", "experiment",
)
# what a run writes into its folder besides metrics.jsonl (which MetricsLog starts afresh); a run that starts
# over removes them, so no checkpoint, built model or event file of an earlier run is mixed into it
RUN_OUTPUTS = ("checkpoints", "model_init", "tensorboard")


def config_record(cfg: TrainConfig) -> dict[str, Any]:
    """The config as a checkpoint records it (plain JSON values)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key != "kwargs":  # env.kwargs is one setting, compared whole
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def _resumable(key: str) -> bool:
    return any(key == r or key.startswith(r + ".") for r in RESUMABLE)


def changed_settings(recorded: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """``"key: old there, new now"`` for each run-defining field that differs; a field the record lacks (added to
    the schema since) is not compared."""
    old, new = _flat(recorded), _flat(wanted)
    return [f"{key}: {old[key]!r} there, {value!r} now" for key, value in new.items()
            if key in old and not _resumable(key) and old[key] != value]


def resume_checkpoint(cfg: TrainConfig) -> Path | None:
    """The checkpoint the run continues from (None: it starts over); raises :class:`ConfigError` naming the
    changed fields when the folder holds a run of another config."""
    out = Path(cfg.experiment.output_dir)
    checkpoint = latest_checkpoint(out) if cfg.trainer.resume else None
    if checkpoint is None:
        return None
    state = load_trainer_state(checkpoint)
    # checkpoints written before the config was recorded hold the env id only
    recorded = state.get("config") or {"env": {"id": state.get("env", cfg.env.id)}}
    diffs = changed_settings(recorded, config_record(cfg))
    if diffs:
        raise ConfigError(f"experiment.output_dir: {out} holds a run with other settings ({'; '.join(diffs)}); "
                          "use another experiment.output_dir, or trainer.resume=false to start over there")
    return checkpoint


def start_over(out: Path) -> None:
    """Remove an earlier run's checkpoints, built model and TensorBoard events from ``out``."""
    for name in RUN_OUTPUTS:
        if (out / name).is_dir():
            shutil.rmtree(out / name)
