"""The baselines: ReBN on every env family, one table and one figure.

Each baseline is an experiment preset ``conf/experiment/baselines/<name>.yaml`` in two scales:
the CPU tiny scale (``scale=tiny``, the presets' default: the tiny model and tokenizer built from
the env's own text, an SFT warm start on the preset's demonstrator, then ReBN) and the paper's
(``scale=paper``: Qwen3-1.7B/4B-Base, vLLM on a GPU). This module runs the tiny scale of every
preset (or those named), each a separate ``gem-train`` process, ``jobs`` at a time; a finished
run is not run again, so a stopped run of the suite picks up where it was::

    python -m gem_train.baselines                                  # all of them (nox -s baselines)
    python -m gem_train.baselines baselines=[sudoku,math_arithmetic_python] jobs=1
    python -m gem_train.baselines 'overrides=[trainer.iterations=2]' out=runs/baselines-quick

Writes ``<out>/baselines.md`` (per env: held-out return and success at the start, after the warm
start, and at the end; format errors; tool calls per episode; training episodes per second of
rollout; minutes), ``<out>/baselines.png`` (a grid of held-out curves) and
``<out>/baselines.json`` (every number behind both).
"""

from __future__ import annotations

import json
import math
import re
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gem_train.compare import Job, finished, last_wins, parse_options, records_env, run_all, scale_args
from gem_train.metrics_log import read_metrics
from gem_train.run_folder import environments_line, last_environment

_FAMILY = re.compile(r"^# Baseline \(([^)]+)\)")


def presets() -> dict[str, str]:
    """Every baseline preset: name -> family (from the preset's first comment line)."""
    folder = resources.files("gem_train") / "conf" / "experiment" / "baselines"
    found = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            match = next((m for line in entry.read_text().splitlines() if (m := _FAMILY.match(line))), None)
            found[entry.name[: -len(".yaml")]] = match.group(1) if match else "?"
    return found


@dataclass
class BaselinesConfig:
    # preset names (conf/experiment/baselines/<name>.yaml); empty: every one
    baselines: list[str] = field(default_factory=list)
    # trainer.seed of the runs
    seed: int = 0
    # gem-train processes at once (each uses one torch thread)
    jobs: int = 2
    # folder of the runs, the figure and the table
    out: str = "runs/baselines"
    # gem-train overrides added to every run, e.g. [trainer.iterations=2]
    overrides: list[str] = field(default_factory=list)
    # also write the figure and the table here (the README's copies), e.g. gem-train/docs
    copy_to: str | None = None
    # the presets' scale: tiny (their default), paper (Qwen3 on GPUs, each preset's own model from `models`) or
    # paper_sim (the paper path on CPU at small width)
    scale: str | None = None
    # with scale=paper: the folder holding each preset's model as <models>/<its model.hub_name's last part>
    models: str | None = None
    # with scale=paper: a preset's own model folder, over `models` (model_paths.sudoku=/m/Qwen3-4B-Base)
    model_paths: dict[str, str] = field(default_factory=dict)
    # GPUs each run gets (its own); more than one runs it under torchrun, one rank per GPU
    gpus_per_job: int = 1


def plan(cfg: BaselinesConfig) -> list[Job]:
    """One ReBN run per preset, at the tiny scale or ``cfg.scale``; a paper-scale preset whose model is missing
    stops the plan before any run starts."""
    known = presets()
    unknown = [name for name in cfg.baselines if name not in known]
    if unknown:
        raise SystemExit(f"gem_train.baselines: no baseline preset {', '.join(unknown)}; known: {', '.join(known)}")
    jobs = []
    for name in cfg.baselines or list(known):
        out = Path(cfg.out) / name
        jobs.append(Job(name, "rebn", cfg.seed, out, last_wins([
            f"experiment=baselines/{name}",
            *scale_args(f"baselines/{name}", cfg.scale, cfg.models, cfg.model_paths.get(name)),
            f"trainer.seed={cfg.seed}", "experiment.console=false",
            "trainer.tensorboard=false", f"experiment.output_dir={out}", *cfg.overrides])))
    return jobs


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.nan


def summarize(job: Job, family: str) -> dict[str, Any] | None:
    """The numbers of one finished run: held-out curve, start and end, format errors, tool calls, speed."""
    records = read_metrics(job.out / "metrics.jsonl")
    env_id = records_env(records)
    evals = [r for r in records if r["kind"] == "eval" and r.get("env_id") == env_id]
    train = [r for r in records if r["kind"] == "train"]
    if not evals:
        return None
    first, last = evals[0], evals[-1]
    return {
        "env_id": env_id, "family": family,
        "iterations": [int(r["iteration"]) for r in evals],
        "eval_return": [float(r["eval_return"]) for r in evals],
        "eval_success": [float(r["eval_success"]) for r in evals],
        "start_return": float(first["eval_return"]), "end_return": float(last["eval_return"]),
        "start_success": float(first["eval_success"]), "end_success": float(last["eval_success"]),
        "start_format_errors": float(first.get("eval_format_errors", math.nan)),
        "end_format_errors": float(last.get("eval_format_errors", math.nan)),
        "start_tool_calls": float(first.get("eval_tool_calls", math.nan)),
        "end_tool_calls": float(last.get("eval_tool_calls", math.nan)),
        "episodes_per_s": _ratio(sum(r["episodes"] for r in train), sum(r["rollout_s"] for r in train)),
        "minutes": json.loads((job.out / "done.json").read_text())["seconds"] / 60,
        "environment": last_environment(job.out),
    }


def table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown, one row per env: start (after the warm start) -> end of the held-out figures."""
    lines = ["| baseline | env | family | held-out return | success | format errors | tool calls / episode | "
             "episodes/s | min |", "|---|---|---|---|---|---|---|---:|---:|"]
    for name, r in results.items():
        start_end = {key: f"{r[f'start_{key}']:.2f} → {r[f'end_{key}']:.2f}"
                     for key in ("return", "success", "format_errors", "tool_calls")}
        lines.append(f"| {name} | `{r['env_id']}` | {r['family']} | {start_end['return']} | {start_end['success']} | "
                     f"{start_end['format_errors']} | {start_end['tool_calls']} | {r['episodes_per_s']:.1f} | "
                     f"{r['minutes']:.1f} |")
    return "\n".join(lines)


def figure(results: dict[str, dict[str, Any]], path: Path) -> None:
    """A grid of panels, one per env: held-out return and success against iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    cols = min(6, max(len(names), 1))
    rows = max(1, math.ceil(len(names) / cols))
    # one or two panels get room too: at least 6.4 x 3.6 in (700 px wide at the saved dpi), the title wrapped
    width, height = max(2.9 * cols, 6.4), max(2.3 * rows, 3.6) + 0.3
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names):
        r = results[name]
        ax.plot(r["iterations"], r["eval_return"], marker="o", markersize=2.5, label="return")
        ax.plot(r["iterations"], r["eval_success"], marker="s", markersize=2.5, label="success")
        ax.set_title(f"{name}\n{r['env_id']}", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=6)
    title = ("ReBN baselines, tiny model built here, SFT warm start then RL: held-out return and success "
             "per iteration (iteration 0: after the warm start)")
    fig.suptitle(textwrap.fill(title, width=int(width * 16)), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse(argv: Sequence[str]) -> BaselinesConfig:
    """``key=value`` arguments onto :class:`BaselinesConfig`; an unknown key is an error that names it."""
    return parse_options(BaselinesConfig, argv, "gem_train.baselines", __doc__)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse(list(sys.argv[1:] if argv is None else argv))
    jobs = plan(cfg)
    started = time.perf_counter()
    failed = run_all(jobs, cfg.jobs, cfg.gpus_per_job)
    families = presets()
    # the table and the figure hold every preset finished in this folder with these overrides, those of earlier
    # invocations too: running one preset adds its row, it never replaces the others
    every = plan(BaselinesConfig(baselines=[], seed=cfg.seed, jobs=cfg.jobs, out=cfg.out, overrides=cfg.overrides,
                                 scale=cfg.scale, models=cfg.models, model_paths=cfg.model_paths))
    results = {job.experiment: summary for job in every
               if (job.out / "done.json").exists() and finished(job)
               and (summary := summarize(job, families[job.experiment])) is not None}
    out = Path(cfg.out)
    if not results:
        print(f"no baseline has finished in {out}: no table or figure written", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    text = table(results)
    if where := environments_line([r["environment"] for r in results.values()]):
        text += "\n\n" + where
    targets = [out] + ([Path(cfg.copy_to)] if cfg.copy_to else [])
    for folder in targets:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "baselines.md").write_text(text + "\n")
        figure(results, folder / "baselines.png")
    (out / "baselines.json").write_text(json.dumps({"config": OmegaConf.to_container(OmegaConf.structured(cfg)),
                                                    "results": results}, indent=1))
    print(f"\n{text}\n\nfigure: {out / 'baselines.png'}, table: {out / 'baselines.md'} "
          f"({(time.perf_counter() - started) / 60:.1f} min)")
    if failed:
        print(f"{len(failed)} runs failed: " + ", ".join(j.name for j in failed), file=sys.stderr)
        return 1
    # a run that finished without one update (trainer.iterations=0, say) is no baseline: its row is the start
    untrained = [j.experiment for j in jobs if not (j.out / "metrics.jsonl").exists()
                 or not any(r["kind"] == "train" for r in read_metrics(j.out / "metrics.jsonl"))]
    if untrained:
        print(f"{len(untrained)} of {len(jobs)} runs trained nothing (no update): {', '.join(untrained)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
