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
import os
import shutil
from pathlib import Path
from typing import Any

from gem_train.checkpoint import latest_checkpoint, load_trainer_state
from gem_train.config import ConfigError, TrainConfig

#: fields (or whole sections) that a resumed run may change; the rest must match the checkpoint's config
RESUMABLE = (
    "trainer.iterations", "trainer.eval_every", "trainer.eval_episodes", "trainer.eval_temperature",
    "trainer.checkpoint_every", "trainer.keep_checkpoints", "trainer.serving_copy", "trainer.resume",
    "trainer.device", "trainer.threads", "trainer.tensorboard",
    "trainer.wandb", "trainer.wandb_project", "trainer.distributed.backend", "trainer.distributed.timeout_minutes",
    "env.eval_ids", "model.hub_name", "rollout.concurrency", "rollout.batch_wait_ms", "rollout.vllm",
    "rollout.step_timeout", "rollout.episode_timeout", "rollout.processes", "experiment",
    "tiny_scale",  # what it sets is compared where it lands, in trainer.* and rollout.*
    # how the update is cut to fit memory, not what it computes (the same gradients: tests/test_learner_memory.py),
    # so a run stopped out of memory resumes with smaller pieces
    "trainer.micro_batch_size", "trainer.micro_batch_tokens", "trainer.logprob_chunk",
    "trainer.gradient_checkpointing",
)
# what a run writes into its folder besides metrics.jsonl (which MetricsLog starts afresh); a run that starts
# over removes them, so no checkpoint, built model, event file or environment record of an earlier run is mixed
# into it
RUN_OUTPUTS = ("checkpoints", "model_init", "tensorboard", "environment.jsonl")
#: the distributions whose versions decide a run's numbers, recorded with every start (and every gem-* one)
RECORDED_PACKAGES = ("torch", "transformers", "tokenizers", "numpy", "safetensors", "vllm", "reasoning-gym")


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
    """Remove an earlier run's checkpoints, built model, TensorBoard events and environment record from ``out``."""
    for name in RUN_OUTPUTS:
        if (out / name).is_dir():
            shutil.rmtree(out / name)
        elif (out / name).is_file():
            (out / name).unlink()


def environment() -> dict[str, Any]:
    """What a run's figures depend on besides its config: Python, the machine and the versions of the packages
    that compute them (those of :data:`RECORDED_PACKAGES` installed, and every ``gem-*`` distribution)."""
    import platform
    from importlib import metadata

    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    packages = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in RECORDED_PACKAGES or name.startswith("gem-"):
            packages[name] = dist.version
    return {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu,
            "cpus": os.cpu_count(), "packages": dict(sorted(packages.items()))}


def record_environment(out: Path, iteration: int, **extra: Any) -> dict[str, Any]:
    """Append this start's :func:`environment` (and ``extra``: the envs' fingerprints) to ``out/environment.jsonl``
    (a resumed run adds a line, so a run continued elsewhere shows it) and return it."""
    record = {"iteration": iteration, **environment(), **extra}
    with (out / "environment.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")
    return record


def last_environment(out: Path) -> dict[str, Any]:
    """The newest start's record in ``out/environment.jsonl`` ({} where there is none)."""
    path = out / "environment.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return json.loads(lines[-1]) if lines else {}


def environments_line(records: list[dict[str, Any]]) -> str:
    """One sentence for a table of runs: the CPU, Python and :data:`RECORDED_PACKAGES` versions they ran with, and
    which of these differ between them ("" when none is recorded)."""
    seen: dict[str, set[str]] = {}
    for env in filter(None, records):
        for key in ("cpu", "python"):
            seen.setdefault(key, set()).add(str(env.get(key) or "?"))
        for name in RECORDED_PACKAGES:
            if name in env.get("packages", {}):
                seen.setdefault(name, set()).add(env["packages"][name])
    if not seen:
        return ""
    parts = [f"{key} {' / '.join(sorted(values))}" for key, values in seen.items() if key != "cpu"]
    differ = [key for key, values in seen.items() if len(values) > 1]
    line = f"Ran on {' / '.join(sorted(seen['cpu']))}: {', '.join(parts)}"
    return line + (f" (the runs differ in {', '.join(differ)})" if differ else "") + "."
