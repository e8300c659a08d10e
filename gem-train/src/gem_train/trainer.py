"""The training loop: collect episodes, compute advantages, update, sync weights, log.

:func:`train` is a plain function of a :class:`~gem_train.config.TrainConfig`; the CLI
only builds that config. Tests call it directly with a shrunken config.

>>> from gem_train.config import TrainConfig
>>> cfg = TrainConfig()
>>> cfg.trainer.iterations = 2
>>> summary = train(cfg)            # doctest: +SKIP
>>> summary["final_eval_return"]    # doctest: +SKIP

Under ``torchrun`` every rank runs :func:`train`: each learns from its share of the batch
(:mod:`gem_train.distributed`), ``trainer.distributed.rollout`` says who collects the
episodes, and rank 0 alone writes metrics and checkpoints and evaluates.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gem.runner import EpisodeContext
from gem_train import distributed
from gem_train.algorithms.advantages import turn_advantages
from gem_train.algorithms.ppo import explained_variance, gae_turn_advantages
from gem_train.checkpoint import (
    load_critic,
    load_optimizer,
    load_trainer_state,
    save_checkpoint,
)
from gem_train.config import VLLM_ENGINES, ConfigError, TrainConfig, check_model_path, validate
from gem_train.critic import make_critic
from gem_train.curves import write_curves
from gem_train.demonstrations import demonstrations, demonstrator_factory
from gem_train.engines import Engine, Sampling, make_engine
from gem_train.learner import Learner
from gem_train.metrics_log import MetricsLog, open_wandb, read_metrics, require_wandb, show
from gem_train.model import build_tiny_model, load_policy, resolve_device
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
from gem_train.run_folder import config_record, resume_checkpoint, start_over
from gem_train.selfplay import collect_selfplay

TEMPLATED_WRAPPERS = ("concat_chat", "concat_chat_on_reset")


def env_factories(cfg: TrainConfig, env_id: str | None = None
                  ) -> tuple[Callable[[], Any], Callable[[Any], Callable[[], Any]]]:
    """``(make_base_env, wrapped(tokenizer))``: the bare env, and a factory of the env with its wrappers.

    ``env_id`` (an eval id) defaults to the training env; ``env.kwargs`` apply to the training env only.
    """
    import gem
    from gem.wrappers import apply_wrappers

    if cfg.env.entry_point and cfg.env.id not in gem.list_envs():
        gem.register(cfg.env.id, cfg.env.entry_point)
    env_id = env_id or cfg.env.id
    kwargs = dict(cfg.env.kwargs) if env_id == cfg.env.id else {}

    def make_base_env() -> Any:
        return gem.make(env_id, **kwargs)

    def wrapped(tokenizer: Any) -> Callable[[], Any]:
        return lambda: apply_wrappers(make_base_env(), cfg.env.wrappers, tokenizer=tokenizer)

    return make_base_env, wrapped


def check_env_ids(cfg: TrainConfig) -> None:
    """Raise :class:`ConfigError` (gem's "did you mean" on one line) unless every env id of the run is registered."""
    import gem
    from gem.errors import GemError

    env_factories(cfg)  # registers env.id with env.entry_point
    for key, env_id in [("env.id", cfg.env.id), *(("env.eval_ids", i) for i in cfg.env.eval_ids)]:
        try:
            gem.spec(env_id)
        except GemError as exc:
            raise ConfigError(f"{key}: {' '.join(str(exc).splitlines())}") from None


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
        "turns": float(len(turns)),
        "response_tokens": float(sum(len(t.response_ids) for t in turns)),
        "prompt_tokens": float(sum(len(t.prompt_ids) for t in turns)),
        "cut_responses": float(sum(t.finish_reason == "length" for t in turns)),
        "prompts_too_long": float(sum(t.finish_reason == PROMPT_TOO_LONG for t in turns)),
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
        self.make_base_env, wrapped = env_factories(cfg)
        # rank 0 builds the tiny model; the other ranks then find it built (the build is deterministic)
        init_path = cfg.model.path if cfg.model.name == "hf" else str(distributed.main_first(lambda: build_tiny_model(
            self.out / "model_init", self.make_base_env, cfg.model.tiny, cfg.model.max_model_len, cfg.trainer.seed,
        )))
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
        load_from = str(self.checkpoint) if self.checkpoint else init_path
        self.model, self.tokenizer = load_policy(load_from, cfg.model.dtype, self.device)
        self.make_env = wrapped(self.tokenizer)
        names = [w.strip() for w in cfg.env.wrappers.split(",")] if cfg.env.wrappers else []
        self.templated = any(w in TEMPLATED_WRAPPERS for w in names)
        self.engine_path = load_from
        self.eval_envs = {cfg.env.id: self.make_env}
        for env_id in cfg.env.eval_ids:
            self.eval_envs[env_id] = env_factories(cfg, env_id)[1](self.tokenizer)

    def engine(self) -> Engine:
        cfg = self.cfg
        options: dict[str, Any] = {"dtype": cfg.model.dtype, "seed": cfg.trainer.seed}
        if cfg.rollout.engine in VLLM_ENGINES:
            v = cfg.rollout.vllm
            options.update(max_model_len=cfg.model.max_model_len, kv_cache_memory_bytes=v.kv_cache_memory_bytes,
                           gpu_memory_utilization=v.gpu_memory_utilization, enforce_eager=v.enforce_eager)
        else:
            options["device"] = self.device
        return make_engine(cfg.rollout.engine, self.engine_path, **options)

    def encode(self, observation: Any) -> list[int]:
        """Prompt ids of an observation, as the policy builds them."""
        return encode_prompt(self.tokenizer, observation, self.templated)

    def policy(self, engine: Engine, temperature: float, seed: int) -> EnginePolicy:
        r = self.cfg.rollout
        sampling = Sampling(temperature=temperature, top_p=r.top_p if temperature > 0 else 1.0,
                            max_tokens=r.max_tokens, seed=seed)
        return EnginePolicy(engine, self.tokenizer, sampling,
                            self.cfg.model.max_model_len, self.templated, r.batch_wait_ms / 1000)

    def learner(self, lr: float | None = None, rl: bool = True) -> Learner:
        """The RL learner (with PPO's critic, restored from the checkpoint when resuming), or with ``rl=False``
        the SFT stage's."""
        cfg = self.cfg
        constant = cfg.algo.norm_constant if cfg.algo.norm_constant is not None else float(cfg.rollout.max_tokens)
        critic = None
        if rl and cfg.algo.name == "ppo":
            critic = make_critic(self.model, cfg.algo.critic, cfg.algo.critic_path)
            if self.checkpoint is not None:
                load_critic(self.checkpoint, critic)
        return Learner(self.model, cfg.algo, cfg.trainer, cfg.rollout.temperature, constant,
                       self.tokenizer.pad_token_id, lr=lr, seed=cfg.trainer.seed, critic=critic)


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
    learner = run.learner(lr=sft.lr, rl=False)
    rng = random.Random(cfg.trainer.seed)
    rank, world = distributed.rank(), distributed.world_size()
    for epoch in range(sft.epochs):
        # every rank builds the same demonstrations and shuffles them alike, then learns from its share of a batch
        rng.shuffle(samples)
        losses = []
        for i in range(0, len(samples), sft.batch_size):
            batch = samples[i:i + sft.batch_size]
            first, last = distributed.shard_range(len(batch), rank, world)
            losses.append(learner.supervised_update(batch[first:last])["sft_loss"])
        run.log.write("sft", epoch=epoch + 1, sft_loss=sum(losses) / max(len(losses), 1), turns=float(len(samples)),
                      **stats, seconds=time.perf_counter() - start)


def _evaluate(run: _Run, engine: Engine, iteration: int) -> dict[str, float]:
    """Held-out episodes on the training env and each of ``env.eval_ids``; returns the training env's metrics."""
    cfg = run.cfg
    seeds = list(range(cfg.env.eval_seed_start, cfg.env.eval_seed_start + cfg.trainer.eval_episodes))
    results = {}
    for env_id, make_env in run.eval_envs.items():
        start = time.perf_counter()
        policy = run.policy(engine, cfg.trainer.eval_temperature, cfg.trainer.seed + 7)
        episodes = collect(make_env, policy, seeds, concurrency=cfg.rollout.concurrency, max_turns=cfg.env.max_turns)
        results[env_id] = episode_metrics(episodes, prefix="eval_")
        run.log.write("eval", iteration=iteration, env_id=env_id, **results[env_id],
                      eval_s=time.perf_counter() - start)
    return results[cfg.env.id]


class _OffsetPolicy:
    """A rank's view of the policy: episode ``i`` of its share is episode ``offset + i`` of the whole batch, so
    each request is seeded (by episode index and turn) as in a single process, and no two ranks share draws."""

    def __init__(self, policy: EnginePolicy, offset: int) -> None:
        self.policy, self.offset = policy, offset

    async def act(self, observation: Any, context: EpisodeContext | None = None) -> tuple[str, dict[str, TurnSample]]:
        if context is not None:
            context = dataclasses.replace(context, index=context.index + self.offset)
        return await self.policy.act(observation, context)


def _collect_iteration(run: _Run, engine: Engine, iteration: int, share: tuple[int, int] = (0, 1)
                       ) -> tuple[list[Episode], EnginePolicy, list[tuple[float, float]], int | None]:
    """One iteration's episodes: one batch of ``rollout.episodes_per_iter``, or waves of it until
    ``rollout.turns_per_iter`` turns are in. Also returns the policy, the intervals of the env steps and how many
    of the turns to train on (the first ``rollout.turns_per_iter`` in episode order; None: all).

    ``share = (rank, world)``: this rank plays its contiguous share of each wave's groups, and the ranks count
    their turns together, so the waves, and the turns kept, are those of a single process playing them all.
    """
    cfg = run.cfg
    rank, world = share
    # per (run seed, iteration); the policy derives each request's seed from it and (episode, turn)
    policy = run.policy(engine, cfg.rollout.temperature, derive_seed(cfg.trainer.seed, iteration))
    episodes: list[Episode] = []
    steps: list[tuple[float, float]] = []
    counts: list[list[int]] = []  # turns of each wave on each rank

    def make_env() -> Any:
        return StepClock(run.make_env(), steps)

    wave = 0
    while wave == 0 or sum(map(sum, counts)) < (cfg.rollout.turns_per_iter or 0):
        seeds, groups = train_seeds(iteration, cfg, wave)
        if wave > 0:
            # the runner numbers each wave's episodes from 0 again: a fresh seed keeps their draws apart
            policy.sampling = dataclasses.replace(policy.sampling, seed=derive_seed(cfg.trainer.seed, iteration, wave))
        size = cfg.algo.group_size  # whole groups per rank: GRPO and RLOO need no statistics from other ranks
        first, last = (size * g for g in distributed.shard_range(len(seeds) // size, rank, world))
        offset = _OffsetPolicy(policy, first)  # the runner needs only act()
        collector = collect_selfplay if cfg.env.selfplay else collect
        played = collector(make_env, offset, seeds[first:last], groups[first:last],  # type: ignore[arg-type]
                           cfg.rollout.concurrency, cfg.env.max_turns)
        episodes += played
        turns = sum(len(ep.turns) for ep in played)
        counts.append(distributed.all_gather(turns) if world > 1 else [turns])
        wave += 1
    if not cfg.rollout.turns_per_iter:
        return episodes, policy, steps, None
    # every wave but the last is kept whole (fewer turns than asked for made another wave necessary)
    before = sum(map(sum, counts[:-1])) + sum(counts[-1][:rank])
    keep = sum(c[rank] for c in counts[:-1]) + min(max(cfg.rollout.turns_per_iter - before, 0), counts[-1][rank])
    return episodes, policy, steps, keep


def _bootstrap_values(cfg: TrainConfig, learner: Learner, episodes: list[Episode],
                      encode: Callable[[Any], list[int]] | None) -> list[float]:
    """Per episode, the critic's value of the state after its last turn: its final observation when a turn limit
    cut it short, else 0 (also 0 when that prompt would not fit in ``model.max_model_len``)."""
    out = [0.0] * len(episodes)
    if encode is None:
        return out
    cut = {}
    for i, ep in enumerate(episodes):
        if ep.cut_short and ep.trajectory is not None and ep.trajectory.final_observation is not None:
            prompt = encode(ep.trajectory.final_observation)
            if 0 < len(prompt) <= cfg.model.max_model_len:
                cut[i] = TurnSample(prompt, [], [], "stop")
    if cut:
        for i, value in zip(cut, learner.values(list(cut.values()))):
            out[i] = value
    return out


def _advantages(cfg: TrainConfig, learner: Learner, episodes: list[Episode], keep: int | None = None,
                sharded: bool = False, encode: Callable[[Any], list[int]] | None = None,
                ) -> tuple[list[TurnSample], dict[str, Any], dict[str, float]]:
    """The iteration's turns (the first ``keep``), the learner's inputs for them (advantages; for PPO also the
    critic's values and the GAE targets) and metrics of the critic.

    ``encode`` turns an observation into prompt ids; with it, PPO bootstraps episodes cut short by a turn limit
    from the critic's value of their final observation.

    ``sharded``: the episodes are this rank's share; ReBN's and PPO's batch statistics and the critic's
    metrics are the global batch's (group estimators need none: a rank plays whole groups).
    """
    a = cfg.algo
    reduce = distributed.all_reduce_moments if sharded else None
    rewards = [ep.rewards for ep in episodes]
    samples = [turn for ep in episodes for turn in ep.turns]
    inputs: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    if a.name == "ppo":
        flat_values = learner.values(samples)
        values, i = [], 0
        for ep in episodes:
            values.append(flat_values[i:i + len(ep.turns)])
            i += len(ep.turns)
        last = _bootstrap_values(cfg, learner, episodes, encode)
        advantages = turn_advantages(rewards, [ep.group for ep in episodes], "ppo", a.gamma, a.normalize_std,
                                     values=values, lam=a.gae_lambda, last_values=last, reduce=reduce)
        _, targets = gae_turn_advantages(rewards, values, a.gamma, a.gae_lambda, last)
        inputs["old_values"] = flat_values
        inputs["value_targets"] = [x for ep in targets for x in ep]
        all_values, all_targets = flat_values, inputs["value_targets"]
        if sharded:
            all_values = [v for share in distributed.all_gather(flat_values) for v in share]
            all_targets = [v for share in distributed.all_gather(all_targets) for v in share]
        metrics["value_mean"] = sum(all_values) / max(len(all_values), 1)
        metrics["explained_variance"] = explained_variance(torch.tensor(all_values), torch.tensor(all_targets))
    else:
        advantages = turn_advantages(rewards, [ep.group for ep in episodes], a.name, a.gamma, a.normalize_std,
                                     reduce=reduce)
    inputs["advantages"] = [x for ep in advantages for x in ep]
    if keep is not None:
        samples = samples[:keep]
        inputs = {k: v[:keep] for k, v in inputs.items()}
    return samples, inputs, metrics


def _scatter_turns(samples: list[TurnSample] | None, inputs: dict[str, Any] | None
                   ) -> tuple[list[TurnSample], dict[str, Any]]:
    """Rank 0's turns and learner inputs, cut into one contiguous share per rank; returns this rank's share
    (the other ranks pass None)."""
    shares = None
    if samples is not None and inputs is not None:
        world = distributed.world_size()
        shares = []
        for r in range(world):
            first, last = distributed.shard_range(len(samples), r, world)
            shares.append((samples[first:last], {k: v[first:last] for k, v in inputs.items()}))
    return distributed.scatter(shares)


def _throughput(samples: list[TurnSample], policy: EnginePolicy, steps: list[tuple[float, float]], rollout_s: float,
                update_s: float, epochs: int, sharded: bool = False) -> dict[str, float]:
    """Tokens/s of rollout and training, and where the rollout's time went: generating, waiting on env steps
    (wall time in which some env steps and no generation ran), and the rest.

    ``sharded``: the tokens are counted over all ranks (each rank's share of the batch); the times are this
    rank's.
    """
    env_s = union_seconds(steps, minus=policy.generate_intervals)
    tokens = {"generated": float(policy.generated_tokens),
              "trained": float(sum(len(s.prompt_ids) + len(s.response_ids) for s in samples if s.response_ids))}
    if sharded:
        tokens = distributed.all_sum(tokens)
    return {
        "rollout_tok_s": tokens["generated"] / max(rollout_s, 1e-9),
        "train_tok_s": tokens["trained"] * epochs / max(update_s, 1e-9),
        "time_generate_s": policy.generate_seconds,
        "time_env_s": env_s,
        # templating, tokenising, the batcher's waits, the runner's bookkeeping
        "time_rollout_other_s": max(rollout_s - policy.generate_seconds - env_s, 0.0),
    }


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run the configured training; returns a summary (first and last evaluation, output folder).

    Writes ``<experiment.output_dir>/metrics.jsonl`` and checkpoints; with
    ``trainer.resume`` a run folder that holds a checkpoint continues from it, if the config
    differs from that checkpoint's in resumable fields only (:mod:`gem_train.run_folder`). Under torchrun
    every rank calls it (``torchrun --nproc_per_node 2 -m gem_train`` does) and joins the
    process group here; only rank 0's summary holds evaluations and curves.
    """
    checkpoint = check_run(cfg)  # before minutes of model building, not after
    if cfg.trainer.threads and cfg.rollout.engine not in VLLM_ENGINES:
        # vLLM's CPU backend binds its own OpenMP threads and fails if torch's count was changed before
        torch.set_num_threads(cfg.trainer.threads)
    d = cfg.trainer.distributed
    joined = distributed.init(resolve_device(cfg.trainer.device), d.backend, d.timeout_minutes)
    try:
        return _train(cfg, checkpoint)
    finally:
        if joined:
            distributed.shutdown()


def _train(cfg: TrainConfig, checkpoint: Path | None) -> dict[str, Any]:
    torch.manual_seed(cfg.trainer.seed)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    run = _Run(cfg, checkpoint)
    t = cfg.trainer
    main = distributed.is_main()
    if main and checkpoint is not None:
        show(f"resuming from {checkpoint} at iteration {run.state['iteration']}")
    # rollout=rank0: rank 0 collects and scatters the turns; every_rank: each rank plays and keeps its share
    scatter = distributed.active() and t.distributed.rollout == "rank0"
    sharded = distributed.active() and not scatter
    collects = main or not scatter
    share = (distributed.rank(), distributed.world_size()) if sharded else (0, 1)
    start_iteration = int(run.state.get("iteration", 0))
    if t.sft.episodes > 0 and not run.state.get("sft_done", False):
        _sft(run)
        if main:
            # iteration 0: the warm-started model, so a resumed run does not repeat the SFT stage
            save_checkpoint(run.out, 0, run.model, run.tokenizer, None, run.record)
    engine = run.engine() if collects else None
    summary: dict[str, Any] = {"output_dir": str(run.out), "resumed_from": str(run.checkpoint or "")}
    try:
        if engine is not None and run.checkpoint is None and t.sft.episodes > 0:
            engine.load_weights(run.model.state_dict())  # the engine started from the pre-SFT folder
        learner = run.learner()
        if run.checkpoint is not None:
            load_optimizer(run.checkpoint, learner.optimizer)
        logged = read_metrics(run.out / "metrics.jsonl") if main else []
        if main and t.eval_every > 0 and not any(r["kind"] == "eval" and r.get("iteration") == start_iteration
                                                 for r in logged):
            # a resumed run whose checkpoint iteration was evaluated already does not log that evaluation twice
            summary["first_eval"] = _evaluate(run, engine, start_iteration)
        for iteration in range(start_iteration + 1, t.iterations + 1):
            t0 = time.perf_counter()
            samples: list[TurnSample] | None = None
            inputs: dict[str, Any] | None = None
            if collects:
                episodes, policy, steps, keep = _collect_iteration(run, engine, iteration, share)
                t1 = time.perf_counter()
                samples, inputs, critic_metrics = _advantages(cfg, learner, episodes, keep, sharded, run.encode)
            mine, my_inputs = _scatter_turns(samples, inputs) if scatter else (samples, inputs)
            update = learner.update(mine, seed=derive_seed(cfg.trainer.seed, iteration, 1), **my_inputs)
            t2 = time.perf_counter()
            if engine is not None:
                engine.load_weights(learner.state_dict())
            t3 = time.perf_counter()
            if collects:
                # with sharded rollouts the ranks add up their counts: the record describes the global batch
                counts = {"turns_trained": float(len(samples))}
                summary["last_train"] = run.log.write(
                    "train", iteration=iteration,
                    **episode_metrics(episodes, reduce=distributed.all_sum if sharded else None),
                    **update, **critic_metrics,
                    **_throughput(samples, policy, steps, t1 - t0, t2 - t1, cfg.algo.epochs, sharded),
                    **(distributed.all_sum(counts) if sharded else counts),
                    rollout_s=t1 - t0, update_s=t2 - t1, sync_s=t3 - t2, generate_calls=policy.generate_calls,
                )
            if main and t.eval_every > 0 and (iteration % t.eval_every == 0 or iteration == t.iterations):
                summary["last_eval"] = _evaluate(run, engine, iteration)
            if main and ((t.checkpoint_every > 0 and iteration % t.checkpoint_every == 0) or iteration == t.iterations):
                save_checkpoint(run.out, iteration, run.model, run.tokenizer, learner.optimizer, run.record,
                                critic=learner.critic)
    finally:
        if engine is not None:
            engine.close()
        run.log.close()
    if main:
        records = read_metrics(run.out / "metrics.jsonl")
        summary["curves"] = write_curves(records, run.out)
        if cfg.experiment.console:
            show(f"\n{summary['curves']}\ncurves: {run.out / 'curves.png'}, TensorBoard: {run.out / 'tensorboard'}")
    # every rank returns once rank 0 has finished the run folder
    distributed.barrier()
    return summary
