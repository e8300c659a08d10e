"""Checkpoints: the model as a normal HF folder, the optimiser, and where the loop was.

``<output_dir>/checkpoints/iter_000010/`` holds ``config.json``, the weights, the
tokenizer, ``optimizer.pt``, ``trainer_state.json`` and, for PPO, ``critic.pt``; any HF
tool loads the folder. ``trainer.keep_checkpoints`` keeps the newest few (:func:`prune_checkpoints`);
``trainer.checkpoint_every`` says which iterations write one (:func:`saves_at`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from gem_train.model import tied_names

PREFIX = "iter_"
#: the checkpoint's subfolder with the model in the compute dtype, for serving
SERVE = "serve"


def save_checkpoint(output_dir: str | Path, iteration: int, model: Any, tokenizer: Any, optimizer: Any | None,
                    state: dict[str, Any], critic: Any | None = None, serve_dtype: torch.dtype | None = None,
                    weights: dict[str, torch.Tensor] | None = None) -> Path:
    """Write the checkpoint of ``iteration``; written to a temporary name first so a crash leaves none half-done.

    The folder holds the float32 masters (a resume loses nothing); with ``serve_dtype`` (the compute dtype, when
    it is not float32) a ``serve/`` folder beside them holds the same model in that dtype, half the size, the one
    to serve (``vllm serve .../serve``). PPO's ``critic`` (its head, and its backbone when it has its own) goes to
    ``critic.pt``. A sharded (fsdp) learner passes the gathered ``weights`` and, as ``optimizer``, the gathered
    optimizer state (a dict) instead of the objects.
    """
    root = Path(output_dir) / "checkpoints"
    final = root / f"{PREFIX}{iteration:06d}"
    tmp = root / f".tmp_{PREFIX}{iteration:06d}"
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp, state_dict=weights)
    tokenizer.save_pretrained(tmp)
    if serve_dtype is not None and serve_dtype != torch.float32:
        # made in host memory: on a GPU a whole copy beside the learner and the woken sampler may not fit
        # a tied weight once (the loader ties the head to the embedding; two copies would add the largest tensor)
        tied = tied_names(model)
        served = {k: v.detach().to("cpu", serve_dtype) if v.is_floating_point() else v.detach().cpu()
                  for k, v in (weights if weights is not None else model.state_dict()).items() if k not in tied}
        model.save_pretrained(tmp / SERVE, state_dict=served)
        tokenizer.save_pretrained(tmp / SERVE)
        config = json.loads((tmp / SERVE / "config.json").read_text())
        config["torch_dtype"] = config["dtype"] = str(serve_dtype).removeprefix("torch.")
        (tmp / SERVE / "config.json").write_text(json.dumps(config, indent=2))
    if optimizer is not None:
        torch.save(optimizer if isinstance(optimizer, dict) else optimizer.state_dict(), tmp / "optimizer.pt")
    if critic is not None:
        torch.save(critic.state_dict(), tmp / "critic.pt")
    (tmp / "trainer_state.json").write_text(json.dumps({"iteration": iteration, **state}, indent=1))
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def saves_at(iteration: int, every: int | None, last: int) -> bool:
    """Whether ``iteration`` of a run of ``last`` iterations writes a checkpoint: every ``every``-th and the last
    (``every`` 0: the last alone; None: none).

    >>> [i for i in range(1, 8) if saves_at(i, 3, 7)], saves_at(7, 0, 7), saves_at(7, None, 7)
    ([3, 6, 7], True, False)
    """
    return every is not None and ((every > 0 and iteration % every == 0) or iteration == last)


def complete_checkpoints(output_dir: str | Path) -> list[Path]:
    """The complete checkpoints under ``output_dir``, oldest first."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob(f"{PREFIX}*") if (p / "trainer_state.json").exists())


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint under ``output_dir``, or None."""
    done = complete_checkpoints(output_dir)
    return done[-1] if done else None


def prune_checkpoints(output_dir: str | Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` complete checkpoints, except iteration 0's (the warm start's model, which
    the comparison's runs start from); the paths removed. Called after a checkpoint is complete, so a crash at any
    point leaves the newest one whole."""
    done = [p for p in complete_checkpoints(output_dir) if p.name != f"{PREFIX}{0:06d}"]
    removed = done[:max(len(done) - keep, 0)]
    for path in removed:
        shutil.rmtree(path)
    return removed


def load_trainer_state(checkpoint: str | Path) -> dict[str, Any]:
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text())


def load_optimizer(checkpoint: str | Path, optimizer: Any) -> None:
    """Restore the optimiser saved with the checkpoint (the one after SFT has none: RL starts afresh); a
    learner restores it itself (sharded, each rank takes its shard of the whole state)."""
    path = Path(checkpoint) / "optimizer.pt"
    if path.exists():
        state = torch.load(path, weights_only=True)
        if hasattr(optimizer, "load_optimizer_state"):
            optimizer.load_optimizer_state(state)
        else:
            optimizer.load_state_dict(state)


def load_critic(checkpoint: str | Path, critic: Any) -> None:
    """Restore PPO's critic saved with the checkpoint (none is saved before RL starts: it starts afresh)."""
    path = Path(checkpoint) / "critic.pt"
    if path.exists():
        critic.load_state_dict(torch.load(path, weights_only=True))
