"""The training loop: collect episodes, prepare them, update, sync weights; log, evaluate, checkpoint.

:func:`train` is a plain function of a :class:`~gem_train.config.TrainConfig`; the CLI
only builds that config. Tests call it directly with a shrunken config.

>>> from gem_train.config import TrainConfig
>>> cfg = TrainConfig()
>>> cfg.trainer.iterations = 2
>>> summary = train(cfg)            # doctest: +SKIP
>>> summary["final_eval_return"]    # doctest: +SKIP

Each iteration: the rollout (:mod:`gem_train.rollout`) plays the episodes, the algorithm
object (:mod:`gem_train.algos`) prepares them (advantages; PPO's critic values), the learner
(:mod:`gem_train.learner`) updates, and the engine gets the new weights. Under ``torchrun``
every rank runs the same loop; :mod:`gem_train.sharding` says which episodes each plays and
which turns each learns from, and rank 0 alone writes metrics and checkpoints and evaluates.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gem.fingerprint import safe_fingerprint
from gem_train import distributed
from gem_train.algos import Algorithm, Batch, make_algorithm
from gem_train.checkpoint import (
    SERVE,
    latest_checkpoint,
    load_optimizer,
    load_trainer_state,
    prune_checkpoints,
    save_checkpoint,
    saves_at,
)
from gem_train.config import VLLM_ENGINES, ConfigError, TrainConfig, carries_over, check_model_path, validate
from gem_train.curves import curve_summary, write_curves, written
from gem_train.demonstrations import demonstrations, demonstrator_factory
from gem_train.engines import Engine, Sampling, make_engine
from gem_train.engines.base import sleep, wake
from gem_train.envs import check_env_ids, env_factory, templated
from gem_train.learner import Learner
from gem_train.metrics_log import MetricsLog, open_wandb, read_metrics, require_wandb, show
from gem_train.model import DTYPES, build_tiny_model, load_policy, resolve_device, tied_names
from gem_train.rollout import (
    PROMPT_TOO_LONG,
    EnginePolicy,
    Episode,
    StepClock,
    TurnSample,
    collect,
    derive_seed,
    encode_prompt,
    union_seconds,
)
from gem_train.run_folder import config_record, record_environment, resume_checkpoint, start_over
from gem_train.selfplay import collect_selfplay
from gem_train.sharding import Shards
from gem_train.stream import HEARTBEAT_S, EpisodeStream, effective_tis_cap, staleness_mask


def _fingerprint(make_env: Callable[[], Any]) -> str | None:
    """The fingerprint of the env ``make_env`` builds (one built and closed for it)."""
    env = make_env()
    try:
        return safe_fingerprint(env)
    finally:
        env.close()


def check_run(cfg: TrainConfig) -> Path | None:
    """Every check that needs no model: the values, ``model.path``, the env ids, wandb when asked for, and that
    the run folder holds no run of another config. Returns the checkpoint to resume from (None: a fresh run).

    Raises :class:`ConfigError`; the CLI calls it before Hydra makes the run folder, :func:`train` again.
    """
    validate(cfg)
    check_model_path(cfg)
    check_env_ids(cfg)
    if cfg.trainer.wandb:
        try:
            require_wandb()
        except ImportError as exc:
            raise ConfigError(f"trainer.wandb: {exc}") from None
    return resume_checkpoint(cfg)


# episode_metrics' means per turn; the others are per episode
PER_TURN = ("response_tokens", "prompt_tokens", "cut_responses", "prompts_too_long")


def episode_metrics(episodes: list[Episode], prefix: str = "",
                    reduce: Callable[[dict[str, float]], dict[str, float]] | None = None) -> dict[str, float]:
    """Return, success rate, turns and token counts of a batch of episodes.

    ``reduce`` turns this batch's sums into the global batch's when the batch is one rank's share
    (:func:`gem_train.distributed.all_sum`).
    """
    turns = [t for ep in episodes for t in ep.turns]
    sums = {
        "episodes": float(len(episodes)),
        "return": sum(ep.total_return for ep in episodes),
        "success": float(sum(ep.success for ep in episodes)),
        "format_errors": float(sum(ep.format_error for ep in episodes)),
        # calls a tool wrapper ran (python, search, MCP), per episode
        "tool_calls": float(sum(ep.tool_calls for ep in episodes)),
        "turns": float(len(turns)),
        "response_tokens": float(sum(len(t.response_ids) for t in turns)),
        "prompt_tokens": float(sum(len(t.prompt_ids) for t in turns)),
        "cut_responses": float(sum(t.finish_reason == "length" for t in turns)),
        "prompts_too_long": float(sum(t.finish_reason == PROMPT_TOO_LONG for t in turns)),
        # ended early by a rollout limit or a lost worker (rollout.step_timeout, episode_timeout, processes)
        "env_faults": float(sum(ep.error is not None for ep in episodes)),
    }
    if reduce is not None:
        sums = reduce(sums)
    n, nt = max(sums["episodes"], 1.0), max(sums["turns"], 1.0)
    return {f"{prefix}{key}": value if key == "episodes" else value / (nt if key in PER_TURN else n)
            for key, value in sums.items()}


def train_seeds(iteration: int, cfg: TrainConfig, wave: int = 0) -> tuple[list[int], list[int]]:
    """Reset seeds and group ids of one iteration's episodes (a group shares its seed).

    ``wave`` counts the extra batches of an iteration that collects ``rollout.turns_per_iter`` turns.
    """
    groups = cfg.rollout.episodes_per_iter // cfg.algo.group_size
    first = cfg.trainer.seed * 1_000_003 + iteration * groups + wave * 1_000_000_007
    seeds = [first + g for g in range(groups) for _ in range(cfg.algo.group_size)]
    return seeds, [wave * groups + g for g in range(groups) for _ in range(cfg.algo.group_size)]


class OutOfDeviceMemory(RuntimeError):
    """The device ran out of memory in one phase of the run; the message names it and the settings that size it."""


@dataclasses.dataclass
class _Phase:
    """Where the run is (what an out-of-memory error is reported against)."""

    name: str = "setup"
    iteration: int = 0

    def at(self, name: str, iteration: int | None = None) -> None:
        self.name = name
        if iteration is not None:
            self.iteration = iteration


def _out_of_memory(cfg: TrainConfig, phase: _Phase, exc: BaseException) -> OutOfDeviceMemory:
    """One paragraph for a run out of device memory: where, how full the device was, the settings that size that
    phase with their values, and the checkpoint to resume from (those settings may change on resume)."""
    from gem_train.plan import GiB, memory_fields

    text = " ".join(str(exc).split())
    first = ". ".join(text.split(". ")[:2])[:200] if text else type(exc).__name__  # torch's: what it tried to take
    held = ""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        free, total = torch.cuda.mem_get_info()
        held = f", {(total - free) / GiB:.1f} of {total / GiB:.1f} GiB in use"
    where = f"the {phase.name}" + (f" of iteration {phase.iteration}" if phase.iteration else "")
    done = latest_checkpoint(cfg.experiment.output_dir)
    kept = (f" The checkpoint of iteration {load_trainer_state(done)['iteration']} is kept: the same command with "
            "smaller pieces resumes from it." if done is not None else "")
    return OutOfDeviceMemory(
        f"out of device memory in {where} ({first}{held}). What sizes it: {'; '.join(memory_fields(cfg, phase.name))}."
        f" python -m gem_train.plan with the same overrides estimates each part.{kept}")


class _Unlogged:
    """The metrics log of the ranks other than 0: a record is returned, not written."""

    def write(self, kind: str, **record: Any) -> dict[str, Any]:
        return {"kind": kind, **record}

    def close(self) -> None:
        """Nothing was opened."""


class _Run:
    """The objects of one run, built from the config."""

    def __init__(self, cfg: TrainConfig, checkpoint: Path | None) -> None:
        self.cfg = cfg
        self.out = Path(cfg.experiment.output_dir)
        if checkpoint is None and distributed.is_main():
            start_over(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.device = distributed.local_device(resolve_device(cfg.trainer.device))
        self.shards = Shards.current(cfg.trainer.distributed.rollout)
        make_base_env = env_factory(cfg)
        # rank 0 builds the tiny model; the other ranks then find it built (the build is deterministic)
        began = time.perf_counter()
        init_path = cfg.model.path if cfg.model.name == "hf" else str(distributed.main_first(lambda: build_tiny_model(
            self.out / "model_init", make_base_env, cfg.model.tiny, cfg.model.max_model_len, cfg.trainer.seed,
            device=self.device,
        )))
        if cfg.model.name != "hf":
            setup_line(f"tiny model ready in {time.perf_counter() - began:.0f} s ({init_path}; a folder built "
                       "before is reused)")
        self.checkpoint = checkpoint
        self.state: dict[str, Any] = load_trainer_state(checkpoint) if checkpoint else {}
        self.record = {"sft_done": True, "env": cfg.env.id, "config": config_record(cfg)}
        t = cfg.trainer
        self.log: MetricsLog | _Unlogged = MetricsLog(
            self.out / "metrics.jsonl", console=cfg.experiment.console,
            keep_until=int(self.state["iteration"]) if self.checkpoint else None,
            tensorboard_dir=self.out / "tensorboard" if t.tensorboard else None,
            wandb_run=open_wandb(t.wandb_project, cfg.experiment.name, self.out, dataclasses.asdict(cfg))
            if t.wandb else None,
        ) if distributed.is_main() else _Unlogged()
        if cfg.model.name == "hf":
            # the env is made once before the weights load (the tiny model's build has made one): a dataset that is
            # not here stops the run in a second, not after minutes of loading a real model
            make_base_env().close()
        load_from = str(self.checkpoint) if self.checkpoint else init_path
        # float32 masters whatever model.dtype says: the learner computes in model.dtype, the sampler holds it
        began = time.perf_counter()
        self.model, self.tokenizer = load_policy(load_from, "float32", self.device)
        setup_line(f"learner's float32 weights on {self.device} in {time.perf_counter() - began:.0f} s")
        self.make_env = make_base_env.wrapped(cfg.env.wrappers, self.tokenizer)
        self.templated = templated(cfg)
        # a resume's sampler reads the checkpoint's copy in the compute dtype where there is one (half the bytes)
        served = Path(load_from) / SERVE
        self.engine_path = str(served) if self.checkpoint and (served / "config.json").is_file() else load_from
        self.eval_envs = {cfg.env.id: self.make_env}
        for env_id in cfg.env.eval_ids:
            self.eval_envs[env_id] = env_factory(cfg, env_id).wrapped(cfg.env.wrappers, self.tokenizer)
        # which code, data, arguments and prompt each env is (gem.fingerprint): in every metrics record, the run
        # folder's environment.jsonl and the checkpoints
        self.fingerprints = {env_id: _fingerprint(make) for env_id, make in self.eval_envs.items()}
        self.record["env_fingerprints"] = self.fingerprints
        if distributed.is_main():
            record_environment(self.out, int(self.state.get("iteration", 0)), env_fingerprints=self.fingerprints)
        r = cfg.rollout
        # gem.runner's env-side limits, for training and evaluation episodes alike
        self.env_limits = {"step_timeout": r.step_timeout, "episode_timeout": r.episode_timeout,
                           "processes": r.processes}
        # the wall-clock intervals of the stream's env steps (rollout.carry_over), emptied at each take
        self.steps: list[tuple[float, float]] = []

    def engine(self) -> Engine:
        cfg = self.cfg
        options: dict[str, Any] = {"dtype": cfg.model.dtype, "seed": cfg.trainer.seed}
        if cfg.rollout.engine in VLLM_ENGINES:
            v = cfg.rollout.vllm
            options.update(max_model_len=cfg.model.max_model_len, kv_cache_memory_bytes=v.kv_cache_memory_bytes,
                           gpu_memory_utilization=v.gpu_memory_utilization, enforce_eager=v.enforce_eager)
        else:
            options["device"] = self.device
            if cfg.rollout.engine == "hf_async":
                options.update(max_model_len=cfg.model.max_model_len, gather_s=cfg.rollout.batch_wait_ms / 1000)
        return make_engine(cfg.rollout.engine, self.engine_path, **options)

    def encode(self, observation: Any) -> list[int]:
        """Prompt ids of an observation, as the policy builds them."""
        return encode_prompt(self.tokenizer, observation, self.templated)

    def policy(self, engine: Engine | None, temperature: float, seed: int) -> EnginePolicy:
        """The sampling policy (``engine`` None: a rank that plays no episodes)."""
        r = self.cfg.rollout
        sampling = Sampling(temperature=temperature, top_p=r.top_p if temperature > 0 else 1.0,
                            max_tokens=r.max_tokens, seed=seed)
        return EnginePolicy(engine, self.tokenizer, sampling,  # type: ignore[arg-type]
                            self.cfg.model.max_model_len, self.templated, r.batch_wait_ms / 1000)

    def algorithm(self) -> Algorithm:
        """The ``algo.name`` object; PPO's critic is restored from the checkpoint when resuming."""
        cfg = self.cfg
        return make_algorithm(cfg.algo, policy=self.model, checkpoint=self.checkpoint, encode=self.encode,
                              max_model_len=cfg.model.max_model_len)

    def learner(self, lr: float | None = None, algorithm: Algorithm | None = None) -> Learner:
        """The learner of the model (and of ``algorithm``'s critic): RL's, or without an algorithm the SFT
        stage's."""
        cfg = self.cfg
        constant = cfg.algo.norm_constant if cfg.algo.norm_constant is not None else float(cfg.rollout.max_tokens)
        algo = dataclasses.replace(cfg.algo, tis_cap=effective_tis_cap(cfg.algo.tis_cap, cfg.algo.loss,
                                                                        carries_over(cfg)))
        return Learner(self.model, algo, cfg.trainer, cfg.rollout.temperature, constant,
                       self.tokenizer.pad_token_id, lr=lr, seed=cfg.trainer.seed,
                       critic=algorithm.critic if algorithm is not None else None, compute_dtype=cfg.model.dtype)


def _sft(run: _Run) -> None:
    cfg, sft = run.cfg, run.cfg.trainer.sft
    start = time.perf_counter()
    # demonstration seeds sit below the eval seeds and apart from the RL seeds' start
    seeds = range(cfg.env.eval_seed_start // 2, cfg.env.eval_seed_start // 2 + sft.episodes)
    samples, stats = demonstrations(
        run.make_env, demonstrator_factory(cfg.env.demonstrator), run.tokenizer, seeds, noise=sft.noise,
        format_noise=sft.format_noise, templated=run.templated, max_model_len=cfg.model.max_model_len,
        max_turns=cfg.env.max_turns, seed=cfg.trainer.seed,
    )
    learner = run.learner(lr=sft.lr)
    rng = random.Random(cfg.trainer.seed)
    shards = Shards(rank=distributed.rank(), world=distributed.world_size())
    for epoch in range(sft.epochs):
        # every rank builds the same demonstrations and shuffles them alike, then learns from its share of a batch
        rng.shuffle(samples)
        losses = []
        for i in range(0, len(samples), sft.batch_size):
            losses.append(learner.supervised_update(shards.share(samples[i:i + sft.batch_size]))["sft_loss"])
        run.log.write("sft", epoch=epoch + 1, epochs=sft.epochs, sft_loss=sum(losses) / max(len(losses), 1),
                      turns=len(samples),
                      **stats, seconds=time.perf_counter() - start)


def _evaluate(run: _Run, engine: Engine, iteration: int) -> dict[str, float]:
    """Held-out episodes on the training env and each of ``env.eval_ids``; returns the training env's metrics."""
    cfg = run.cfg
    seeds = list(range(cfg.env.eval_seed_start, cfg.env.eval_seed_start + cfg.trainer.eval_episodes))
    results = {}
    for env_id, make_env in run.eval_envs.items():
        start = time.perf_counter()
        policy = run.policy(engine, cfg.trainer.eval_temperature, cfg.trainer.seed + 7)
        episodes = collect(make_env, policy, seeds, concurrency=cfg.rollout.concurrency, max_turns=cfg.env.max_turns,
                           **run.env_limits)
        results[env_id] = episode_metrics(episodes, prefix="eval_")
        _record_episodes(run.out / "eval_episodes.jsonl", iteration, env_id, make_env, episodes,
                         run.fingerprints[env_id])
        run.log.write("eval", iteration=iteration, env_id=env_id, **results[env_id],
                      eval_s=time.perf_counter() - start, env_fingerprint=run.fingerprints[env_id])
    return results[cfg.env.id]


def _record_episodes(path: Path, iteration: int, env_id: str, make_env: Any, episodes: list[Episode],
                     fingerprint: str | None) -> None:
    """Append the evaluation's episodes to ``path`` as ``gem replay`` reads them (gem eval's fields, and how the
    env was built), so anyone can check that the env still gives their rewards."""
    with path.open("a", encoding="utf-8") as f:
        for index, ep in enumerate(episodes):
            turns = ep.trajectory.turns if ep.trajectory is not None else []
            f.write(json.dumps({
                "kind": "eval", "iteration": iteration, "env_id": env_id, "episode": index, "sample": 0,
                "seed": ep.seed, "actions": [t.action for t in turns], "rewards": [t.reward for t in turns],
                "terminated": bool(turns and turns[-1].terminated), "error": ep.error,
                "fingerprint": fingerprint, "env_kwargs": getattr(make_env, "kwargs", {}),
                "wrappers": getattr(make_env, "wrappers", None), "entry_point": getattr(make_env, "entry_point", None),
            }, default=repr) + "\n")


@dataclasses.dataclass
class _Rollout:
    """One iteration's episodes on this rank, and what their collection measured."""

    # every episode played, those that failed alone included (their metrics count; they are not trained on)
    episodes: list[Episode]
    policy: EnginePolicy
    # the wall-clock intervals of the env steps
    steps: list[tuple[float, float]]
    # how many turns of the intact episodes to train on (the first, in episode order; None: all)
    keep: int | None

    @property
    def intact(self) -> list[Episode]:
        return [ep for ep in self.episodes if ep.error is None]


def _collect_iteration(run: _Run, engine: Engine | None, iteration: int) -> _Rollout:
    """One iteration's episodes: one batch of ``rollout.episodes_per_iter``, or waves of it until
    ``rollout.turns_per_iter`` turns are in, this rank playing its share (:class:`~gem_train.sharding.Shards`).
    The ranks count their turns together, so the waves, and the turns kept, are those of one process playing
    them all."""
    cfg, shards = run.cfg, run.shards
    # per (run seed, iteration); the policy derives each request's seed from it and (episode, turn)
    policy = run.policy(engine, cfg.rollout.temperature, derive_seed(cfg.trainer.seed, iteration))
    episodes: list[Episode] = []
    steps: list[tuple[float, float]] = []
    counts: list[list[int]] = []  # turns of each wave on each rank

    def clocked_env() -> Any:
        return StepClock(run.make_env(), steps)

    # worker processes build the envs from the picklable factory; their steps' clock stays in the workers
    make_env = run.make_env if cfg.rollout.processes else clocked_env
    wave = 0
    while wave == 0 or sum(map(sum, counts)) < (cfg.rollout.turns_per_iter or 0):
        seeds, groups = train_seeds(iteration, cfg, wave)
        if wave > 0:
            # the runner numbers each wave's episodes from 0 again: a fresh seed keeps their draws apart
            policy.sampling = dataclasses.replace(policy.sampling, seed=derive_seed(cfg.trainer.seed, iteration, wave))
        first, last = shards.episodes(len(seeds) // cfg.algo.group_size, cfg.algo.group_size)
        policy.index_offset = first
        if cfg.env.selfplay:
            played = collect_selfplay(make_env, policy, seeds[first:last], groups[first:last],
                                      cfg.rollout.concurrency, cfg.env.max_turns,
                                      step_timeout=cfg.rollout.step_timeout,
                                      episode_timeout=cfg.rollout.episode_timeout)
        else:
            played = collect(make_env, policy, seeds[first:last], groups[first:last], cfg.rollout.concurrency,
                             cfg.env.max_turns, **run.env_limits)
        episodes += played
        counts.append(shards.count_turns(sum(len(ep.turns) for ep in played if ep.error is None)))
        wave += 1
    return _Rollout(episodes, policy, steps, shards.kept_turns(counts, cfg.rollout.turns_per_iter))


def _stream(run: _Run, engine: Engine | None) -> EpisodeStream | None:
    """The run's episode stream (``rollout.carry_over``) on a rank that plays; a resumed run's starts at the
    first group its checkpoint had not started. Each rank plays its own groups (every ``world``-th)."""
    cfg, shards = run.cfg, run.shards
    if not carries_over(cfg) or engine is None:
        return None
    policy = run.policy(engine, cfg.rollout.temperature, derive_seed(cfg.trainer.seed, -1))
    policy.index_offset = shards.rank * 10**12  # the ranks' request seeds apart
    stride, own = (shards.world, shards.rank) if shards.mode != "rank0" else (1, 0)
    first_seed = train_seeds(1, cfg)[0][0]
    run.steps = []
    steps = run.steps

    def clocked_env() -> Any:
        return StepClock(run.make_env(), steps)

    return EpisodeStream(run.make_env if cfg.rollout.processes else clocked_env, policy,
                         lambda group: first_seed + group * stride + own, cfg.algo.group_size,
                         cfg.rollout.concurrency, cfg.env.max_turns,
                         first_group=int(run.state.get("stream_next_group", 0)),
                         max_staleness=cfg.rollout.max_staleness,
                         heartbeat_s=HEARTBEAT_S if distributed.is_main() else None, **run.env_limits)


def _take_iteration(run: _Run, stream: EpisodeStream | None) -> _Rollout:
    """One iteration's episodes from the stream: this rank's share of ``rollout.episodes_per_iter`` (or of
    ``rollout.turns_per_iter`` turns), whole groups in the order they finished."""
    cfg, shards, r = run.cfg, run.shards, run.cfg.rollout
    first, last = shards.episodes(r.episodes_per_iter // cfg.algo.group_size, cfg.algo.group_size)
    turns = None if r.turns_per_iter is None else -(-r.turns_per_iter * (last - first) // r.episodes_per_iter)
    episodes: list[Episode] = []
    if stream is not None and last > first:
        run.steps.clear()
        episodes = stream.take(last - first, turns)
    counts = [shards.count_turns(sum(len(ep.turns) for ep in episodes if ep.error is None))]
    policy = stream.policy if stream is not None else run.policy(None, cfg.rollout.temperature, 0)
    return _Rollout(episodes, policy, run.steps, shards.kept_turns(counts, r.turns_per_iter))


def _drop_stale(batch: Batch, stream: EpisodeStream | None, max_staleness: int | None) -> tuple[Batch, dict]:
    """The batch without the turns more than ``max_staleness`` versions old, and how stale it was."""
    if stream is None:
        return batch, {}
    kept = staleness_mask(batch.samples, stream.version, max_staleness)
    ages = [float(stream.version - s.version) for s in batch.samples]
    sums = distributed.all_sum({"turns": float(len(ages)), "age": sum(ages),
                                "stale": float(len(kept) - sum(kept))})
    metrics = {"staleness_mean": sums["age"] / max(sums["turns"], 1.0), "stale_turns_dropped": sums["stale"]}
    if all(kept):
        return batch, metrics
    return Batch([s for s, k in zip(batch.samples, kept) if k],
                 {key: [v for v, k in zip(values, kept) if k] for key, values in batch.inputs.items()},
                 batch.metrics), metrics


def _throughput(samples: list[TurnSample], policy: EnginePolicy, steps: list[tuple[float, float]], rollout_s: float,
                update_s: float, epochs: int) -> dict[str, float]:
    """Tokens/s of rollout and training, and where the rollout's time went: generating, waiting on env steps
    (wall time in which some env steps and no generation ran), and the rest.

    The tokens are counted over all ranks (each holds its share of the batch); the times are this rank's.
    """
    env_s = union_seconds(steps, minus=policy.generate_intervals)
    tokens = distributed.all_sum({
        "generated": float(policy.generated_tokens),
        "trained": float(sum(len(s.prompt_ids) + len(s.response_ids) for s in samples if s.response_ids)),
    })
    return {
        "rollout_tok_s": tokens["generated"] / max(rollout_s, 1e-9),
        "train_tok_s": tokens["trained"] * epochs / max(update_s, 1e-9),
        "time_generate_s": policy.generate_seconds,
        "time_env_s": env_s,
        # templating, tokenising, the batcher's waits, the runner's bookkeeping
        "time_rollout_other_s": max(rollout_s - policy.generate_seconds - env_s, 0.0),
    }


def _report_faults(iteration: int, rollout: _Rollout) -> None:
    failed = [ep for ep in rollout.episodes if ep.error is not None]
    if failed and distributed.is_main():
        show(f"[train] | it {iteration:3d} | {len(failed)} of {len(rollout.episodes)} episodes failed and are not "
             f"trained on; the first: {failed[0].error}")


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run the configured training; returns a summary (first and last evaluation, output folder).

    Writes ``<experiment.output_dir>/metrics.jsonl`` and checkpoints; with
    ``trainer.resume`` a run folder that holds a checkpoint continues from it, if the config
    differs from that checkpoint's in resumable fields only (:mod:`gem_train.run_folder`). Under torchrun
    every rank calls it (``torchrun --nproc_per_node 2 -m gem_train`` does) and joins the
    process group here; only rank 0's summary holds evaluations and curves.
    """
    checkpoint = check_run(cfg)  # before minutes of model building, not after
    check_memory(cfg)
    if checkpoint is not None and int(load_trainer_state(checkpoint).get("iteration", 0)) >= cfg.trainer.iterations:
        return _finished(cfg, checkpoint)
    if cfg.trainer.threads and cfg.rollout.engine not in VLLM_ENGINES:
        # vLLM's CPU backend binds its own OpenMP threads and fails if torch's count was changed before
        torch.set_num_threads(cfg.trainer.threads)
    d = cfg.trainer.distributed
    joined = distributed.init(resolve_device(cfg.trainer.device), d.backend, d.timeout_minutes)
    phase = _Phase()
    try:
        return _train(cfg, checkpoint, phase)
    except Exception as exc:
        from gem_train.plan import is_out_of_memory

        if is_out_of_memory(exc):
            raise _out_of_memory(cfg, phase, exc) from exc
        raise
    finally:
        if joined:
            distributed.shutdown()


def setup_line(text: str) -> None:
    """One line of what the run did before its first iteration and how long it took (building a model and
    loading an engine can take minutes at paper scale: the console says so rather than stay silent)."""
    if distributed.is_main():
        show(f"[setup] {text}")


def check_memory(cfg: TrainConfig) -> None:
    """On a GPU, the memory plan (:mod:`gem_train.plan`) first: a config that cannot fit stops here, naming the
    fields to change, not after minutes of loading and an out-of-memory error."""
    if resolve_device(cfg.trainer.device) != "cuda":
        return
    from gem_train.plan import report

    text, fits = report(cfg, torch.cuda.get_device_properties(0).total_memory)
    if not fits:
        raise ConfigError(f"the memory plan does not fit this GPU (python -m gem_train.plan shows it):\n{text}")


def _finished(cfg: TrainConfig, checkpoint: Path) -> dict[str, Any]:
    """A rerun of a run that reached ``trainer.iterations``: one line that says so and how to train again, then
    its curves as they were (nothing is trained, built or rewritten)."""
    out = Path(cfg.experiment.output_dir)
    done = int(load_trainer_state(checkpoint)["iteration"])
    summary: dict[str, Any] = {"output_dir": str(out), "resumed_from": str(checkpoint), "finished": True}
    if os.environ.get("RANK", "0") == "0":  # before the process group: torchrun's other ranks say nothing
        show(f"{out} holds a finished run ({done} of {cfg.trainer.iterations} iterations): nothing to train. "
             f"To start over: trainer.resume=false (or another experiment.output_dir=...); to train on: "
             f"trainer.iterations={done + max(1, done)}")
        records = read_metrics(out / "metrics.jsonl")
        if records and cfg.experiment.console:
            summary["curves"] = curve_summary(records)
            show(f"\n{summary['curves']}\n{written(out)}")
    return summary


def _gather_for_checkpoint(learner: Learner, main: bool) -> tuple[dict[str, torch.Tensor] | None, Any]:
    """Sharded (fsdp): the float32 weights and the optimizer's state, gathered whole for rank 0's checkpoint, into
    host memory (a whole float32 copy need not fit on the GPU beside the sampler). Every rank takes part in each
    gather, but only rank 0 keeps what it gathers: another rank lets each weight go as it comes, on its device, so
    a node holds one host copy, not one per rank (at 4B on eight GPUs, 16 GiB instead of 128). Unsharded: nothing
    to gather, (None, None)."""
    if not learner.sharded:
        return None, None
    weights = {name: tensor for name, tensor in learner.iter_weights(device="cpu" if main else None) if main}
    return (weights if main else None), learner.optimizer_state()


def _sync(learner: Learner, engine: Engine | None, dtype: torch.dtype) -> None:
    """The updated weights into the sampler. The engine wakes its weights first (vLLM on a GPU takes back their
    memory), the weights stream in one tensor at a time in its dtype, then its KV cache wakes: the sync holds the
    learner's masters and moments, the sampler's weights and one tensor, not also a whole copy of the model (at 4B
    on 80 GB that copy does not fit) nor the KV cache. Sharded, the gather is a collective every rank takes part in,
    engine or not, on its main thread (vllm_async loads on its stepping thread): the whole copy is gathered first,
    and let go before the KV cache wakes."""
    if learner.sharded:
        weights = learner.state_dict(dtype)
        if engine is not None:
            wake(engine, "weights")
            engine.load_weights(weights)
        del weights
    elif engine is not None:
        wake(engine, "weights")
        engine.load_weights(learner.iter_weights(dtype))
    wake(engine)


def _train(cfg: TrainConfig, checkpoint: Path | None, phase: _Phase) -> dict[str, Any]:
    torch.manual_seed(cfg.trainer.seed)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    main = distributed.is_main()
    if main and checkpoint is not None:
        # first, before the minutes of building and loading that the [setup] lines report
        show(f"resuming from {checkpoint} at iteration {load_trainer_state(checkpoint)['iteration']}")
    run = _Run(cfg, checkpoint)
    t = cfg.trainer
    if main and checkpoint is not None:
        before = run.state.get("env_fingerprints") or {}
        changed = [f"{env_id} ({before[env_id]} then, {now} now)" for env_id, now in run.fingerprints.items()
                   if before.get(env_id) and now and before[env_id] != now]
        if changed:
            show(f"note: the env changed since the checkpoint (its code, data, arguments or prompt): "
                 f"{', '.join(changed)}")
    start_iteration = int(run.state.get("iteration", 0))
    if t.sft.episodes > 0 and not run.state.get("sft_done", False):
        phase.at("warm start (SFT)")
        _sft(run)
        if main:
            # iteration 0: the warm-started model, so a resumed run does not repeat the SFT stage
            save_checkpoint(run.out, 0, run.model, run.tokenizer, None, run.record)
    began = time.perf_counter()
    phase.at("sampler start")
    engine = run.engine() if run.shards.plays else None
    if engine is not None:
        setup_line(f"sampler ({cfg.rollout.engine}) ready in {time.perf_counter() - began:.0f} s")
    stream: EpisodeStream | None = None
    summary: dict[str, Any] = {"output_dir": str(run.out), "resumed_from": str(run.checkpoint or "")}
    try:
        if engine is not None and run.checkpoint is None and t.sft.episodes > 0:
            # the engine started from the pre-SFT folder; it holds its weights in the compute dtype
            tied = tied_names(run.model)
            engine.load_weights({k: v.detach().to(DTYPES[cfg.model.dtype]) if v.is_floating_point() else v
                                 for k, v in run.model.state_dict().items() if k not in tied})
        algorithm = run.algorithm()
        learner = run.learner(algorithm=algorithm)
        algorithm.bind(learner)
        if run.checkpoint is not None:
            load_optimizer(run.checkpoint, learner)
        logged = read_metrics(run.out / "metrics.jsonl") if main else []
        if main and t.eval_every > 0 and not any(r["kind"] == "eval" and r.get("iteration") == start_iteration
                                                 for r in logged):
            # a resumed run whose checkpoint iteration was evaluated already does not log that evaluation twice
            phase.at("evaluation")
            summary["first_eval"] = _evaluate(run, engine, start_iteration)
        stream = _stream(run, engine)
        for iteration in range(start_iteration + 1, t.iterations + 1):
            t0 = time.perf_counter()
            phase.at("generation", iteration)
            rollout = _take_iteration(run, stream) if carries_over(cfg) else _collect_iteration(
                run, engine, iteration)
            t1 = time.perf_counter()
            _report_faults(iteration, rollout)
            phase.at("update")
            sleep(engine)  # vLLM on a GPU frees its weights and KV cache for the update
            batch, staleness = _drop_stale(algorithm.prepare(rollout.intact, rollout.keep), stream,
                                           cfg.rollout.max_staleness)
            batch = run.shards.learner_share(batch)
            update = learner.update(batch.samples, seed=derive_seed(cfg.trainer.seed, iteration, 1), **batch.inputs)
            t2 = time.perf_counter()
            phase.at("weight sync")
            _sync(learner, engine, DTYPES[cfg.model.dtype])
            if stream is not None:
                stream.advance()
            t3 = time.perf_counter()
            # the ranks add up their counts: the record describes the global batch
            summary["last_train"] = run.log.write(
                "train", iteration=iteration, **episode_metrics(rollout.episodes, reduce=distributed.all_sum),
                **update, **batch.metrics, **staleness,
                **_throughput(batch.samples, rollout.policy, rollout.steps, t1 - t0, t2 - t1, cfg.algo.epochs),
                **distributed.all_sum({"turns_trained": float(len(batch.samples))}),
                rollout_s=t1 - t0, update_s=t2 - t1, sync_s=t3 - t2, generate_calls=rollout.policy.generate_calls,
                env_fingerprint=run.fingerprints[cfg.env.id],
            )
            if main and t.eval_every > 0 and (iteration % t.eval_every == 0 or iteration == t.iterations):
                phase.at("evaluation")
                summary["last_eval"] = _evaluate(run, engine, iteration)
            if saves_at(iteration, t.checkpoint_every, t.iterations):
                if carries_over(cfg):  # a resumed run's stream starts after every rank's started groups
                    run.record["stream_next_group"] = max(distributed.all_gather(
                        stream.next_group if stream is not None else 0))
                phase.at("checkpoint")
                gathered = _gather_for_checkpoint(learner, main)
                if main:
                    save_checkpoint(run.out, iteration, run.model, run.tokenizer, gathered[1] or learner.optimizer,
                                    run.record, serve_dtype=DTYPES[cfg.model.dtype] if t.serving_copy else None,
                                    critic=learner.critic, weights=gathered[0])
                    if t.keep_checkpoints is not None:
                        prune_checkpoints(run.out, t.keep_checkpoints)
    finally:
        if stream is not None:
            stream.close()
        if engine is not None:
            engine.close()
        run.log.close()
    if main:
        records = read_metrics(run.out / "metrics.jsonl")
        summary["curves"] = write_curves(records, run.out)
        if cfg.experiment.console:
            show(f"\n{summary['curves']}\n{written(run.out)}")
    # every rank returns once rank 0 has finished the run folder
    distributed.barrier()
    return summary
