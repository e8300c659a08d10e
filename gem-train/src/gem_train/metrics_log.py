"""Metrics: one JSON line per record in ``metrics.jsonl``, a short console line, and the
same numbers as TensorBoard scalars and (when asked for) Weights & Biases.

Console lines go through the ``gem_train`` logger (:func:`show`): under the ``gem-train``
app Hydra's logging config sends them to the screen as plain text and to ``gem-train.log``.

Scalars are tagged ``<kind>/<key>`` (``train/return``, ``sft/sft_loss``) and, for
evaluation, ``eval/<env id>/<key>``; their step is the record's iteration (the epoch
for SFT records).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

# key in the record -> label on the console line
CONSOLE = {
    "return": "return",
    "success": "success",
    "turns": "turns",
    "response_tokens": "resp_tok",
    "loss": "loss",
    "kl_sampler": "kl",
    "entropy": "ent",
    "format_errors": "fmt_err",
    "eval_return": "eval_return",
    "eval_success": "eval_success",
    "sft_loss": "sft_loss",
    "rollout_s": "rollout_s",
    "update_s": "update_s",
    "rollout_tok_s": "gen_tok/s",
}
# fields of a record that label it rather than measure something
LABELS = ("kind", "iteration", "epoch", "epochs", "env_id")

logger = logging.getLogger("gem_train")


def show(text: str, stream: TextIO | None = None) -> None:
    """Log ``text`` at INFO on the ``gem_train`` logger where logging is set up to take it, else print it (to
    ``stream``, or stdout), so a plain ``train(cfg)`` call still shows its progress."""
    if stream is None and logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
        logger.info(text)
    else:
        print(text, file=stream or sys.stdout, flush=True)


def import_failure(package: str, exc: ImportError) -> str:
    """Why an optional package's import failed, for a run that goes on without it: not installed (and the pip
    line), or installed and broken (its own error, which a pip line would not fix)."""
    try:
        installed = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a module object without a spec in sys.modules
        installed = False
    if not installed:
        return f"the {package} package is not installed (pip install {package})"
    return f"the {package} package is installed but did not import ({type(exc).__name__}: {exc})"


def require_wandb() -> Any:
    """The ``wandb`` module, or an ImportError that says how to get it (``trainer.wandb=true`` without it)."""
    try:
        import wandb
    except ImportError as exc:
        raise ImportError("logging to W&B needs the wandb package: pip install wandb (or pip install "
                          "'gem-train[wandb]'), or leave trainer.wandb=false (metrics.jsonl and TensorBoard are "
                          "written either way)") from exc
    return wandb


def open_wandb(project: str, name: str, folder: str | Path, config: dict[str, Any]) -> Any:
    """A W&B run named ``name`` in ``project``, its files under ``folder``."""
    return require_wandb().init(project=project, name=name, dir=str(folder), config=config)


class MetricsLog:
    """Appends records to ``path`` (JSONL) and shows each as one line when ``console`` (:func:`show`; to
    ``stream`` if one is given).

    >>> log = MetricsLog("runs/demo/metrics.jsonl")     # doctest: +SKIP
    >>> log.write("train", iteration=1, **{"return": 0.5})  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | Path,
        console: bool = True,
        stream: TextIO | None = None,
        keep_until: int | None = None,
        tensorboard_dir: str | Path | None = None,
        wandb_run: Any = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.stream = stream
        self._keep(keep_until)
        self.tensorboard = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                # a gem-train installed without its dependencies (gpu_check.sh's bundle on a bare image): the
                # run goes on, its scalars being in metrics.jsonl anyway
                show(f"no TensorBoard scalars: {import_failure('tensorboard', exc)}; metrics.jsonl holds every "
                     "figure (trainer.tensorboard=false turns this off)", stream)
            else:
                self.tensorboard = SummaryWriter(str(tensorboard_dir))
        self.wandb_run = wandb_run

    def _keep(self, keep_until: int | None) -> None:
        """A fresh run (None) starts an empty file; a run resumed at iteration k keeps the records up to k, so
        records written after the checkpoint a crash left behind do not appear twice."""
        if keep_until is None or not self.path.exists():
            self.path.write_text("")
            return
        kept = [r for r in read_metrics(self.path) if r.get("iteration", 0) <= keep_until]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))

    def write(self, kind: str, **record: Any) -> dict[str, Any]:
        record = {"kind": kind, **record}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        self._scalars(record)
        if self.console:
            parts = [f"[{kind}]"]
            if "iteration" in record:
                parts.append(f"it {record['iteration']:>3}")
            if "epoch" in record:  # a warm start's progress: "epoch 3/8"
                parts.append(f"epoch {record['epoch']}/{record['epochs']}" if "epochs" in record
                             else f"epoch {record['epoch']}")
            for key, label in CONSOLE.items():
                value = record.get(key)
                if isinstance(value, float):
                    parts.append(f"{label} {value:.3f}")
                elif isinstance(value, int) and not isinstance(value, bool):  # a count, such as a warm start's turns
                    parts.append(f"{label} {value}")
            show(" | ".join(parts), self.stream)
        return record

    def _scalars(self, record: dict[str, Any]) -> None:
        if self.tensorboard is None and self.wandb_run is None:
            return
        prefix = f"{record['kind']}/{record['env_id']}/" if "env_id" in record else f"{record['kind']}/"
        step = int(record.get("iteration", record.get("epoch", 0)))
        values = {prefix + k: float(v) for k, v in record.items()
                  if k not in LABELS and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if self.tensorboard is not None:
            for tag, value in values.items():
                self.tensorboard.add_scalar(tag, value, step)
            self.tensorboard.flush()
        if self.wandb_run is not None:
            self.wandb_run.log({**values, "iteration": step})

    def close(self) -> None:
        """Flush and close the TensorBoard writer and the W&B run."""
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
