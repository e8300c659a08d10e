"""The learning curves of a run: ``curves.png`` and a text summary, both from ``metrics.jsonl``.

>>> from gem_train.metrics_log import read_metrics
>>> text = write_curves(read_metrics("runs/guess_the_number/metrics.jsonl"), "runs/guess_the_number")  # doctest: +SKIP
>>> print(text)                                                                                        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

# per-iteration timings of a train record, as stacked in the time-split panel
TIME_SPLIT = (("time_generate_s", "generation"), ("time_env_s", "waiting on envs"),
              ("time_rollout_other_s", "rollout overhead"), ("update_s", "learning"), ("sync_s", "weight sync"))


def _series(records: Sequence[dict[str, Any]], kind: str, key: str, env_id: str | None = None
            ) -> tuple[list[int], list[float]]:
    rows = [r for r in records if r["kind"] == kind and key in r and (env_id is None or r.get("env_id") == env_id)]
    return [int(r["iteration"]) for r in rows], [float(r[key]) for r in rows]


def _eval_envs(records: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r.get("env_id", "") for r in records if r["kind"] == "eval"))


def curve_summary(records: Sequence[dict[str, Any]]) -> str:
    """A table of the evaluations (one column per evaluated iteration) and the mean time split of an iteration."""
    lines = []
    for env_id in _eval_envs(records):
        its, ret = _series(records, "eval", "eval_return", env_id)
        _, succ = _series(records, "eval", "eval_success", env_id)
        _, fmt = _series(records, "eval", "eval_format_errors", env_id)
        lines.append(f"held-out evaluation on {env_id or 'the training env'}")
        lines.append("  iteration     " + "".join(f"{i:>7}" for i in its))
        for label, values in (("return", ret), ("success", succ), ("format errors", fmt)):
            if values:
                lines.append(f"  {label:<14}" + "".join(f"{v:>7.2f}" for v in values))
    train = [r for r in records if r["kind"] == "train"]
    if train:
        first, last = train[: max(1, len(train) // 5)], train[-max(1, len(train) // 5):]

        def mean(rows: Sequence[dict[str, Any]], key: str) -> float:
            return sum(float(r.get(key, 0.0)) for r in rows) / len(rows)

        lines.append(f"training episodes, first and last {len(first)} iterations: return {mean(first, 'return'):.2f}"
                     f" -> {mean(last, 'return'):.2f}, success {mean(first, 'success'):.2f} -> "
                     f"{mean(last, 'success'):.2f}, format errors {mean(first, 'format_errors'):.2f} -> "
                     f"{mean(last, 'format_errors'):.2f}, turns {mean(first, 'turns'):.2f} -> "
                     f"{mean(last, 'turns'):.2f}")
        total = sum(mean(train, key) for key, _ in TIME_SPLIT) or 1.0
        split = ", ".join(f"{label} {mean(train, key) / total:.0%}" for key, label in TIME_SPLIT)
        lines.append(f"time per iteration {total:.2f} s: {split}; rollout {mean(train, 'rollout_tok_s'):.0f} tokens/s,"
                     f" training {mean(train, 'train_tok_s'):.0f} tokens/s")
    return "\n".join(lines)


def plot_curves(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write a 2x2 figure: return, success and format-error rate, episode length, time split per iteration;
    iterations on integer ticks, each panel's legend beside it, clear of the data."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on training machines
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    # constrained layout makes room for the legends outside the axes
    fig, axes = plt.subplots(2, 2, figsize=(15, 7.5), layout="constrained")
    ax = axes[0][0]
    ax.plot(*_series(records, "train", "return"), label="train", alpha=0.7)
    for env_id in _eval_envs(records):
        ax.plot(*_series(records, "eval", "eval_return", env_id), marker="o", label=f"eval {env_id}")
    ax.set_title("mean return")
    ax = axes[0][1]
    ax.plot(*_series(records, "train", "success"), label="success (train)")
    ax.plot(*_series(records, "train", "format_errors"), label="format errors (train)")
    for env_id in _eval_envs(records):
        ax.plot(*_series(records, "eval", "eval_success", env_id), marker="o", label=f"success (eval {env_id})")
    ax.set_title("success and format-error rate")
    ax.set_ylim(-0.02, 1.02)
    ax = axes[1][0]
    ax.plot(*_series(records, "train", "turns"), label="train")
    ax.set_title("episode length (turns)")
    ax = axes[1][1]
    its, _ = _series(records, "train", "update_s")
    bottom = [0.0] * len(its)
    for key, label in TIME_SPLIT:
        _, values = _series(records, "train", key)
        if len(values) == len(its):
            ax.bar(its, values, bottom=bottom, label=label)
            bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_title("seconds per iteration")
    for row in axes:
        for a in row:
            a.set_xlabel("iteration")
            a.xaxis.set_major_locator(MaxNLocator(integer=True))
            a.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
            a.grid(alpha=0.3)
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_curves(records: Sequence[dict[str, Any]], folder: str | Path) -> str:
    """``curves.png`` and ``curves.txt`` in ``folder``; returns the summary text."""
    folder = Path(folder)
    text = curve_summary(records)
    (folder / "curves.txt").write_text(text + "\n")
    try:
        plot_curves(records, folder / "curves.png")
    except ImportError as exc:  # installed without its dependencies (gpu_check.sh's bundle on a bare image)
        from gem_train.metrics_log import import_failure

        text += f"\nno curves.png: {import_failure('matplotlib', exc)}"
    return text


def written(folder: str | Path) -> str:
    """The line after a run's summary: where its curves and TensorBoard scalars are, of those that exist."""
    folder = Path(folder)
    files = (("curves", folder / "curves.png"), ("TensorBoard", folder / "tensorboard"))
    return ", ".join(f"{label}: {path}" for label, path in files if path.exists()) or f"curves: {folder / 'curves.txt'}"
