"""The algorithm comparison: every algorithm on every env over several seeds, one figure and one table.

Each env is a gem-train experiment preset (``conf/experiment/compare_*.yaml``, and for the two
tool-using envs the baselines' ``baselines/math_arithmetic_python`` and ``baselines/terminal_shell``),
each algorithm an ``algo`` preset. For every (env, seed) one SFT warm start is trained first
and every algorithm starts from that same checkpoint, so the algorithms differ only in
what they do with their own episodes. Runs are separate ``gem-train`` processes,
``jobs`` at a time; a finished run is not run again (a stopped comparison picks up where
it was), so the command can be repeated to redraw the figure::

    python -m gem_train.compare                                  # the README's grid (nox -s compare)
    python -m gem_train.compare seeds=[0] jobs=1 'overrides=[trainer.iterations=4]'
    python -m gem_train.compare experiments=[compare_sudoku] algos=[ppo,rebn]
    python -m gem_train.compare scale=paper models=/models seeds=[0] jobs=8      # the paper's: GPUs, no warm start

Writes ``<out>/compare.png`` (held-out return against iteration, mean over seeds with
a band of one standard deviation), ``<out>/compare.md`` (the table) and
``<out>/compare.json`` (every number behind both).
"""

from __future__ import annotations

import functools
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import OmegaConf

from gem_train.algorithms.registry import ALGORITHMS
from gem_train.checkpoint import latest_checkpoint, load_trainer_state
from gem_train.metrics_log import read_metrics
from gem_train.run_folder import changed_settings, config_record, environments_line, last_environment

T = TypeVar("T")

ALGO_LABELS = {"reinforce": "REINFORCE", "grpo": "GRPO", "ppo": "PPO", "rebn": "ReBN", "rloo": "RLOO",
               "rebn_ppo": "ReBN+PPO-clip"}


#: the comparison's tool-using envs: a single-turn task behind a tool (math, the python tool) and a multi-turn one
#: whose every action is a tool call (the terminal's shell)
TOOL_EXPERIMENTS = ["baselines/math_arithmetic_python", "baselines/terminal_shell"]

#: the entries of a results' env that are not an algorithm
META = ("env_id", "label")

#: held-out metrics kept per seed: the curves' return and success, and what the tool envs move
EVAL_KEYS = ("eval_return", "eval_success", "eval_format_errors", "eval_tool_calls")


@dataclass
class CompareConfig:
    # gem-train experiment presets, one per env (gem_train/conf/experiment/<name>.yaml)
    # (the last two use a tool: math behind the python tool, one call then an answer; the terminal's shell, a
    # sandboxed command per turn; they are the baselines' presets, the same warm start and budget)
    experiments: list[str] = field(default_factory=lambda: [
        "compare_letter_counting", "compare_guess_the_number", "compare_sudoku", "compare_minesweeper",
        *TOOL_EXPERIMENTS])
    # algo presets (gem_train/conf/algo/<name>.yaml)
    algos: list[str] = field(default_factory=lambda: ["reinforce", "grpo", "ppo", "rebn"])
    # trainer.seed of each repetition (a different tiny model, SFT data and episode seeds)
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    # gem-train processes at once (each uses one torch thread)
    jobs: int = 2
    # folder of the runs, the figure and the table
    out: str = "runs/compare"
    # gem-train overrides added to every run, e.g. [trainer.iterations=4]
    overrides: list[str] = field(default_factory=list)
    # also write the figure here (the README's copy), e.g. docs/compare.png
    figure_copy: str | None = None
    # one SFT warm start per env and seed that every algorithm starts from (the tiny scale's protocol); false:
    # the paper's, every run starts from the preset's own model (model.path) with no warm start
    warm_start: bool = True
    # the presets' scale: null (their own CPU budget), paper (the paper's: Qwen3 on GPUs, each preset's model from
    # `models`, no warm start) or paper_sim (the paper path on CPU at small width, no warm start)
    scale: str | None = None
    # with scale=paper: the folder holding each preset's model as <models>/<its model.hub_name's last part>
    # (models=/models -> /models/Qwen3-1.7B-Base)
    models: str | None = None
    # with scale=paper: a preset's own model folder, over `models` (model_paths.compare_sudoku=/m/Qwen3-4B-Base)
    model_paths: dict[str, str] = field(default_factory=dict)
    # GPUs each run gets (CUDA_VISIBLE_DEVICES, its own); more than one runs it under torchrun, one rank per GPU
    gpus_per_job: int = 1


@dataclass
class Job:
    """One gem-train process: an SFT warm start (``algo`` None) or an RL run from it."""

    experiment: str
    algo: str | None
    seed: int
    out: Path
    args: list[str]

    @property
    def name(self) -> str:
        return f"{self.experiment}/{self.algo or 'sft'}/seed{self.seed}"


def last_wins(args: Sequence[str]) -> list[str]:
    """Hydra overrides with one value per key, the last one given (Hydra refuses a key set twice).

    >>> last_wins(["a=1", "b=2", "a=3"])
    ['b=2', 'a=3']
    """
    keys = [a.partition("=")[0] for a in args]
    return [a for i, a in enumerate(args) if keys[i] not in keys[i + 1:]]


def sft_dir(cfg: CompareConfig, experiment: str, seed: int) -> Path:
    return Path(cfg.out) / experiment / "sft" / f"seed{seed}"


SCALES = ("paper", "paper_sim")


def conf_options(group: str) -> list[str]:
    """The presets of Hydra config group ``group`` (``experiment``, ``algo``), subfolders' as ``folder/name``.

    >>> "baselines/sudoku" in conf_options("experiment"), conf_options("algo")[:2]
    (True, ['grpo', 'ppo'])
    """
    root = resources.files("gem_train") / "conf" / group

    def walk(folder: Any, prefix: str) -> list[str]:
        found = []
        for entry in folder.iterdir():
            if entry.is_dir():
                found += walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(".yaml"):
                found.append(prefix + entry.name[: -len(".yaml")])
        return found

    return sorted(walk(root, ""))


def check_presets(command: str, **named: Sequence[str]) -> None:
    """Stop ``command`` with one line when a name in ``named`` (``experiments=[...]``, ``algos=[...]``) is not a
    preset of its group, listing those that are, before any run starts."""
    for key, names in named.items():
        group = key.removesuffix("s")
        known = conf_options(group)
        if unknown := [name for name in names if name not in known]:
            raise SystemExit(f"{command}: {key}: no {group} preset {', '.join(unknown)}; known: {', '.join(known)}")


#: what a paper-scale job of the runners keeps of its checkpoints (see scale_args)
_ONE_CHECKPOINT = ("trainer.keep_checkpoints=1",)


def scale_args(experiment: str, scale: str | None, models: str | None, own: str | None = None) -> list[str]:
    """The overrides that run preset ``experiment`` at ``scale``: ``scale=...`` and, for the paper's, the preset's
    own model (``own`` when given, else ``<models>/<model.hub_name's last part>``), whose folder must hold a
    ``config.json``, and one checkpoint kept per run: a job needs only its last (to resume, and to tell a finished
    run), and at Qwen3-1.7B each is 22.4 GiB (a later ``overrides=[trainer.keep_checkpoints=...]`` wins)."""
    if scale is None:
        return []
    if scale not in SCALES:
        raise SystemExit(f"scale: must be one of {', '.join(SCALES)} (or left out), got {scale!r}")
    if scale != "paper":
        return [f"scale={scale}"]
    if own:
        path = Path(own)
        if not (path / "config.json").is_file():
            raise SystemExit(f"preset {experiment}: no model at {path} (no config.json there), from model_paths")
        return ["scale=paper", "model.name=hf", f"model.path={path}", *_ONE_CHECKPOINT]
    if not models:
        raise SystemExit("scale=paper needs models=FOLDER: the folder holding each preset's model "
                         "(models=/models -> /models/Qwen3-1.7B-Base); nothing is downloaded")
    record = _composed_record((f"experiment={experiment}",))
    hub = (record or {}).get("model", {}).get("hub_name")
    if not hub:
        raise SystemExit(f"preset {experiment} names no model.hub_name: pass its model.path in overrides")
    path = Path(models) / hub.rsplit("/", 1)[-1]
    if not (path / "config.json").is_file():
        raise SystemExit(f"preset {experiment} trains {hub}: no model at {path} (no config.json there); put the "
                         f"weights there or pass another models=")
    return ["scale=paper", "model.name=hf", f"model.path={path}", *_ONE_CHECKPOINT]


def plan(cfg: CompareConfig) -> tuple[list[Job], list[Job]]:
    """The SFT warm starts and the RL runs of the grid (at a paper scale, no warm start)."""
    if not any(arg.lstrip("+").startswith("hydra.searchpath") for arg in cfg.overrides):  # presets of one's own
        check_presets("gem_train.compare", experiments=cfg.experiments, algos=cfg.algos)
    warm, runs = [], []
    warm_start = cfg.warm_start and cfg.scale is None
    for experiment in cfg.experiments:
        # before any job starts: a missing model says so
        scaled = scale_args(experiment, cfg.scale, cfg.models, cfg.model_paths.get(experiment))
        for seed in cfg.seeds:
            base = [f"experiment={experiment}", *scaled, f"trainer.seed={seed}", "experiment.console=false",
                    "trainer.tensorboard=false", *cfg.overrides]
            sft = sft_dir(cfg, experiment, seed)
            start = sft / "checkpoints" / "iter_000000"
            if warm_start:
                warm.append(Job(experiment, None, seed, sft, last_wins([
                    *base, "trainer.iterations=0", "trainer.eval_every=0", f"experiment.output_dir={sft}"])))
            # the paper's protocol: no warm start, the preset's own model
            origin = ["model.name=hf", f"model.path={start}"] if warm_start else []
            for algo in cfg.algos:
                out = Path(cfg.out) / experiment / algo / f"seed{seed}"
                # an env preset's discount is for the algorithms that discount; a group estimator scores the
                # undiscounted return, and gem-train refuses a discount it would ignore
                undiscounted = ["algo.gamma=1.0"] if algo in ALGORITHMS and not ALGORITHMS[algo].discounts else []
                runs.append(Job(experiment, algo, seed, out, last_wins([
                    *base, f"algo={algo}", *undiscounted, *origin, "trainer.sft.episodes=0",
                    f"experiment.output_dir={out}", f"experiment.name={experiment}-{algo}-seed{seed}"])))
    return warm, runs


def finished(job: Job) -> bool:
    """An SFT job is done when its checkpoint exists; an RL run when it ended with these very arguments
    (a run with other overrides, e.g. more iterations, is run again). Either only while the config its
    arguments compose to now matches the one its checkpoint recorded in every run-defining field
    (:func:`gem_train.run_folder.changed_settings`): a preset edited since (another warm-start learning rate, say)
    runs again rather than leaving a stale row in the table. A change of code alone is not seen: remove the
    folder for that."""
    if job.algo is None:
        done = (job.out / "checkpoints" / "iter_000000" / "trainer_state.json").exists()
    else:
        path = job.out / "done.json"
        done = path.exists() and json.loads(path.read_text()).get("args") == job.args
    return done and _same_settings(job)


def _same_settings(job: Job) -> bool:
    checkpoint = latest_checkpoint(job.out)
    recorded = load_trainer_state(checkpoint).get("config") if checkpoint else None
    now = _composed_record(tuple(job.args))
    return recorded is not None and now is not None and not changed_settings(recorded, now)


@functools.cache
def _composed_record(args: tuple[str, ...]) -> dict[str, Any] | None:
    """The config record gem-train would write for ``args`` (None if they do not compose: running the job says
    why)."""
    from gem_train.config import compose_config

    try:
        return config_record(compose_config(args))
    except Exception:  # any reason is gem-train's to report, in the job's console.log
        return None


#: what gem-train says when a folder's run was made with other run-defining settings
REFUSED = "holds a run with other settings"


def visible_gpus() -> list[str]:
    """The GPUs this process may hand out: ``CUDA_VISIBLE_DEVICES``' entries, else every device torch sees."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1"]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def gpu_slices(gpus: Sequence[str], per_job: int) -> list[list[str]]:
    """``gpus`` cut into disjoint slices of ``per_job``, one per concurrent run (a remainder stays idle).

    >>> gpu_slices(["0", "1", "2", "3", "4"], 2)
    [['0', '1'], ['2', '3']]
    """
    return [list(gpus[i:i + per_job]) for i in range(0, len(gpus) - per_job + 1, per_job)]


def job_command(job: Job, gpus: Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
    """The command and environment of one run: on its own GPUs (``CUDA_VISIBLE_DEVICES``), under torchrun with
    one rank per GPU when it has several; on CPU one torch thread."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    launcher = [sys.executable, "-m", "gem_train"]
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        if len(gpus) > 1:
            launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={len(gpus)}",
                        "-m", "gem_train"]
    return [*launcher, *job.args, "trainer.threads=1"], env


def run_job(job: Job, gpus: Sequence[str] | None = None) -> tuple[Job, int, float]:
    """Run one gem-train process (on ``gpus`` when given); its screen output goes to ``<out>/console.log``
    (Hydra's own ``gem-train.log`` beside it keeps the same lines with timestamps). A folder whose
    earlier run had other run-defining overrides (gem-train refuses to resume it) is started
    over; one that only needs more iterations resumes."""
    job.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    command, env = job_command(job, gpus)
    console = job.out / "console.log"
    with open(console, "w") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    if code != 0 and REFUSED in console.read_text(errors="replace"):
        with open(console, "w") as log:
            code = subprocess.call([*command, "trainer.resume=false"], stdout=log, stderr=subprocess.STDOUT, env=env)
    seconds = time.perf_counter() - start
    if code == 0 and job.algo is not None:
        (job.out / "done.json").write_text(json.dumps({"seconds": seconds, "args": job.args}))
    return job, code, seconds


#: seconds between two progress lines while runs go (a run takes minutes, its own lines go to its console.log)
HEARTBEAT_S = 30.0


def progress(job: Job) -> str:
    """Where a running job is, from its metrics: its warm start's epoch or its iteration, of how many."""
    try:
        records = read_metrics(job.out / "metrics.jsonl")
    except (OSError, ValueError):
        records = []
    last = records[-1] if records else None
    if last is None:
        return "starting (building the model and the demonstrations)"
    if last["kind"] == "sft":
        return f"warm start, epoch {last.get('epoch')}/{last.get('epochs', '?')}"
    iteration = max((int(r["iteration"]) for r in records if r.get("iteration") is not None), default=0)
    record = _composed_record(tuple(job.args))
    total = record["trainer"]["iterations"] if record else "?"
    return f"iteration {iteration}/{total}"


def failure_line(job: Job, code: int) -> str:
    """Why a run failed, in one line: the last line of its console.log, and where the whole log is."""
    console = job.out / "console.log"
    try:
        # Hydra ends a failed job with a hint about HYDRA_FULL_ERROR: the error is the line before it
        lines = [line.strip() for line in console.read_text(errors="replace").splitlines()
                 if line.strip() and not line.startswith("Set the environment variable HYDRA_FULL_ERROR")]
    except OSError:
        lines = []
    why = lines[-1][:300] if lines else "it printed nothing"
    return f"FAILED (exit {code}): {why} (whole log: {console})"


def check_composes(jobs: Sequence[Job]) -> None:
    """Compose one job of each preset and algorithm (the seeds change nothing a config can get wrong) before any
    starts: a bad override or value stops the runner with gem-train's one line for it, not as many failed runs.
    Jobs that add a Hydra search path (presets of one's own) are left to gem-train."""
    from gem_train.config import compose_train_config

    seen = set()
    for job in jobs:
        if (job.experiment, job.algo) not in seen and not any(
                arg.lstrip("+").startswith("hydra.") for arg in job.args):
            seen.add((job.experiment, job.algo))
            compose_train_config(job.args, job.name)


def run_all(jobs: Sequence[Job], workers: int, gpus_per_job: int = 1) -> list[Job]:
    """Run the jobs not yet finished, ``workers`` at a time; returns the ones that failed. Says when each starts
    and ends, and every :data:`HEARTBEAT_S` where the running ones are. Where GPUs are visible each run gets
    ``gpus_per_job`` of its own (so at most as many runs at once as there are such slices)."""
    todo = [j for j in jobs if not finished(j)]
    failed: list[Job] = []
    if not todo:
        return failed
    check_composes(todo)
    slices: queue.SimpleQueue[list[str] | None] = queue.SimpleQueue()
    gpus = visible_gpus()
    if gpus:
        cut = gpu_slices(gpus, gpus_per_job)
        if not cut:
            raise SystemExit(f"gpus_per_job={gpus_per_job} but only {len(gpus)} GPUs are visible")
        workers = min(workers, len(cut))
        for part in cut:
            slices.put(part)
    else:
        for _ in range(workers):
            slices.put(None)
    where = f", {gpus_per_job} GPU(s) each" if gpus else ""
    print(f"{len(todo)} runs to do ({len(jobs) - len(todo)} done already), {workers} at a time{where}", flush=True)
    running: dict[str, tuple[Job, float]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def tracked(job: Job) -> tuple[Job, int, float]:
        with lock:
            running[job.name] = (job, time.perf_counter())
            print(f"  {job.name:<45} started ({job.out / 'console.log'})", flush=True)
        part = slices.get()
        try:
            return run_job(job, part)
        finally:
            slices.put(part)
            with lock:
                running.pop(job.name, None)

    def heartbeat() -> None:
        while not stop.wait(HEARTBEAT_S):
            with lock:
                for job, started in running.values():
                    print(f"  {job.name:<45} {time.perf_counter() - started:7.1f} s  {progress(job)}", flush=True)

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        with ThreadPoolExecutor(workers) as pool:
            for job, code, seconds in pool.map(tracked, todo):
                status = "ok" if code == 0 else failure_line(job, code)
                with lock:  # one line at a time: a thread's print may otherwise split another's from its newline
                    print(f"  {job.name:<45} {seconds:7.1f} s  {status}", flush=True)
                if code != 0:
                    failed.append(job)
    finally:
        stop.set()
    return failed


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, sd


def collect_results(cfg: CompareConfig, runs: Sequence[Job]) -> dict[str, Any]:
    """Per experiment and algorithm: the held-out curve of each seed and the final numbers."""
    results: dict[str, Any] = {}
    for job in runs:
        if not finished(job):
            continue
        records = read_metrics(job.out / "metrics.jsonl")
        env_id = records_env(records)
        evals = [r for r in records if r["kind"] == "eval" and r.get("env_id") == env_id]
        if not evals:
            continue
        train = [r for r in records if r["kind"] == "train"]
        env_id = str(evals[0].get("env_id", ""))
        # a preset from outside the comparison's own (the tool envs: baselines/...) is named, as its env may be
        # trained bare elsewhere
        label = f"`{env_id}`" if job.experiment.startswith("compare_") else f"`{env_id}` ({job.experiment})"
        entry = results.setdefault(job.experiment, {"env_id": env_id, "label": label}).setdefault(
            job.algo, {"seeds": {}})
        entry["seeds"][job.seed] = {
            "iterations": [int(r["iteration"]) for r in evals],
            **{key: [float(r.get(key, 0.0)) for r in evals] for key in EVAL_KEYS},
            "train_return": [float(r["return"]) for r in train],
            "seconds": json.loads((job.out / "done.json").read_text())["seconds"],
        }
    for per_algo in results.values():
        for algo, entry in per_algo.items():
            if algo in META:
                continue
            seeds = list(entry["seeds"].values())
            for key in EVAL_KEYS:
                entry[f"start_{key}"] = _mean_sd([s[key][0] for s in seeds])
                entry[f"final_{key}"] = _mean_sd([s[key][-1] for s in seeds])
            entry["minutes"] = sum(s["seconds"] for s in seeds) / 60 / len(seeds)
    return results


def records_env(records: Sequence[dict[str, Any]]) -> str | None:
    """The training env's id: the first env evaluated (eval_ids come after it)."""
    for r in records:
        if r["kind"] == "eval":
            return r.get("env_id")
    return None


def protocol(cfg: CompareConfig) -> str:
    """What the runs start from, for the figure's title.

    >>> protocol(CompareConfig())
    'tiny model (built here), SFT warm start then RL'
    >>> protocol(CompareConfig(scale="paper_sim"))
    'scale=paper_sim (Qwen3 architecture at small width, built here), no warm start'
    """
    if cfg.scale == "paper_sim":
        return "scale=paper_sim (Qwen3 architecture at small width, built here), no warm start"
    if cfg.scale == "paper":
        return "scale=paper: each preset's own model, no warm start"
    if not cfg.warm_start:
        return "each preset's own model, no warm start"
    return "tiny model (built here), SFT warm start then RL"


def table(results: dict[str, Any], algos: Sequence[str], warm_start: bool = True) -> str:
    """Markdown: final held-out return (mean ± sd over seeds) per env and algorithm, the start beside it (the
    SFT warm start's, or with none the preset's own model's)."""
    start_label = "start (SFT)" if warm_start else "start"
    head = f"| env | {start_label} | " + " | ".join(ALGO_LABELS.get(a, a) for a in algos) + " |"
    lines = [head, "|" + "---|" * (len(algos) + 2)]
    for per_algo in results.values():
        present = [a for a in algos if a in per_algo]
        if not present:
            continue
        start = per_algo[present[0]]["start_eval_return"][0]
        finals = {a: per_algo[a]["final_eval_return"] for a in present}
        best = max(m for m, _ in finals.values())
        cells = []
        for a in algos:
            if a not in finals:
                cells.append("–")
                continue
            m, sd = finals[a]
            text = f"{m:.2f} ± {sd:.2f}"
            cells.append(f"**{text}**" if m == best else text)
        lines.append(f"| {per_algo['label']} | {start:.2f} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| env | " + " | ".join(f"{ALGO_LABELS.get(a, a)} success" for a in algos) + " |")
    lines.append("|" + "---|" * (len(algos) + 1))
    for per_algo in results.values():
        cells = []
        for a in algos:
            if a in per_algo:
                (s0, _), (s1, _) = per_algo[a]["start_eval_success"], per_algo[a]["final_eval_success"]
                cells.append(f"{s0:.2f} → {s1:.2f}")
            else:
                cells.append("–")
        lines.append(f"| {per_algo['label']} | " + " | ".join(cells) + " |")
    tool_envs = [p for p in results.values() if any(
        a in p and max(p[a]["start_eval_tool_calls"][0], p[a]["final_eval_tool_calls"][0]) > 0 for a in algos)]
    if tool_envs:  # what moves where the return may not: format errors, and tool calls per episode
        lines.append("")
        heads = " | ".join(f"{ALGO_LABELS.get(a, a)} format errors; tool calls" for a in algos)
        lines.append(f"| env | {heads} |")
        lines.append("|" + "---|" * (len(algos) + 1))
        for per_algo in tool_envs:
            cells = []
            for a in algos:
                if a not in per_algo:
                    cells.append("–")
                    continue
                e = per_algo[a]
                cells.append(f"{e['start_eval_format_errors'][0]:.2f} → {e['final_eval_format_errors'][0]:.2f}; "
                             f"{e['start_eval_tool_calls'][0]:.2f} → {e['final_eval_tool_calls'][0]:.2f}")
            lines.append(f"| {per_algo['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(results: dict[str, Any], algos: Sequence[str], path: Path, origin: str) -> None:
    """One panel per env: held-out return against iteration, mean over seeds ± one sd; ``origin`` (what the runs
    started from, :func:`protocol`) in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(results)
    columns = min(max(len(envs), 1), 3)
    rows = -(-max(len(envs), 1) // columns)
    fig, grid = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows + 0.3), squeeze=False)
    panels = list(grid.flat)
    for ax in panels[len(envs):]:
        ax.set_visible(False)
    for ax, experiment in zip(panels, envs):
        per_algo = results[experiment]
        for algo in algos:
            if algo not in per_algo:
                continue
            seeds = list(per_algo[algo]["seeds"].values())
            iterations = seeds[0]["iterations"]
            stats = [_mean_sd([s["eval_return"][i] for s in seeds if i < len(s["eval_return"])])
                     for i in range(len(iterations))]
            mean = [m for m, _ in stats]
            ax.plot(iterations, mean, marker="o", markersize=3, label=ALGO_LABELS.get(algo, algo))
            ax.fill_between(iterations, [m - s for m, s in stats], [m + s for m, s in stats], alpha=0.15)
        ax.set_title(per_algo["label"].replace("`", "").replace(" (", "\n("), fontsize=9)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    for row in grid:
        row[0].set_ylabel("held-out return")
    panels[0].legend(fontsize=8)
    n = max((len(e["seeds"]) for per_algo in results.values() for a, e in per_algo.items() if a not in META),
            default=0)
    fig.suptitle(f"{origin}; mean ± sd over {n} seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_options(schema: type[T], argv: Sequence[str], command: str, doc: str | None = None) -> T:
    """``key=value`` arguments onto the dataclass ``schema`` (which has ``jobs``); an unknown key or a bad
    value is an error that names it, prefixed with ``command``. ``-h``/``--help`` prints ``doc`` and the
    options with their defaults, and exits 0."""
    if any(a in ("-h", "--help") for a in argv):
        print(doc or "")
        print(OmegaConf.to_yaml(OmegaConf.structured(schema)))
        raise SystemExit(0)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.from_dotlist(list(argv)))
    except Exception as exc:  # omegaconf's errors name the key; keep the message, drop the traceback
        raise SystemExit(f"{command}: bad argument: {exc}") from None
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, schema)
    if cfg.jobs < 1:  # type: ignore[attr-defined]
        raise SystemExit(f"{command}: jobs must be >= 1, got {cfg.jobs}")  # type: ignore[attr-defined]
    if getattr(cfg, "gpus_per_job", 1) < 1:
        raise SystemExit(f"{command}: gpus_per_job must be >= 1, got {cfg.gpus_per_job}")  # type: ignore[attr-defined]
    return cfg


def parse(argv: Sequence[str]) -> CompareConfig:
    """``key=value`` arguments onto :class:`CompareConfig`; an unknown key is an error that names it."""
    return parse_options(CompareConfig, argv, "gem_train.compare", __doc__)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse(list(sys.argv[1:] if argv is None else argv))
    warm, runs = plan(cfg)
    started = time.perf_counter()
    failed = run_all(warm, cfg.jobs, cfg.gpus_per_job)
    warm_done = {(j.experiment, j.seed) for j in warm if finished(j)}
    ready = [j for j in runs if (j.experiment, j.seed) in warm_done] if warm else runs
    failed += run_all(ready, cfg.jobs, cfg.gpus_per_job)
    out = Path(cfg.out)
    results = collect_results(cfg, runs)
    if not results:
        print(f"no run of the comparison finished in {out}: no table or figure written", file=sys.stderr)
    text = table(results, cfg.algos, warm_start=bool(warm))
    if where := environments_line([last_environment(j.out) for j in [*warm, *runs] if finished(j)]):
        text += "\n\n" + where
    if results:
        (out / "compare.md").write_text(text + "\n")
        (out / "compare.json").write_text(json.dumps({"config": OmegaConf.to_container(OmegaConf.structured(cfg)),
                                                       "results": results}, indent=1))
        figure(results, cfg.algos, out / "compare.png", protocol(cfg))
        if cfg.figure_copy:
            Path(cfg.figure_copy).parent.mkdir(parents=True, exist_ok=True)
            figure(results, cfg.algos, Path(cfg.figure_copy), protocol(cfg))
        print(f"\n{text}\n\nfigure: {out / 'compare.png'}, table: {out / 'compare.md'} "
              f"({(time.perf_counter() - started) / 60:.1f} min)")
    if failed:
        print(f"{len(failed)} runs failed: " + ", ".join(j.name for j in failed), file=sys.stderr)
        return 1
    # a comparison that trained nothing is a failure, not an empty table: a warm start that wrote no checkpoint
    # (trainer.sft.episodes=0 in the overrides: use warm_start=false for the paper's protocol), say
    untrained = [j for j in runs if not finished(j)]
    if untrained or not results:
        why = [f"{j.name}: its warm start left no checkpoint" if (j.experiment, j.seed) not in warm_done
               and warm else f"{j.name}: did not finish" for j in untrained]
        print(f"{len(untrained) or len(runs)} of {len(runs)} runs did not train"
              + (f" ({'; '.join(why[:3])}{'; ...' if len(why) > 3 else ''})" if why else "")
              + ("; with no warm start (the paper's protocol) pass warm_start=false" if warm else ""),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
