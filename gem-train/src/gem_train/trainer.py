"""The training loop: collect episodes, compute advantages, update, sync weights, log.

:func:`train` is a plain function of a :class:`~gem_train.config.TrainConfig`; the CLI
only builds that config. Tests call it directly with a shrunken config.

>>> from gem_train.config import TrainConfig
>>> cfg = TrainConfig()
>>> cfg.trainer.iterations = 2
>>> summary = train(cfg)            # doctest: +SKIP
>>> summary["final_eval_return"]    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gem_train.algorithms.advantages import turn_advantages
from gem_train.algorithms.ppo import explained_variance, gae_turn_advantages
from gem_train.checkpoint import (
    latest_checkpoint,
    load_critic,
    load_optimizer,
    load_trainer_state,
    save_checkpoint,
)
from gem_train.config import TrainConfig, check_model_path, validate
from gem_train.critic import make_critic
from gem_train.curves import write_curves
from gem_train.demonstrations import demonstrations, demonstrator_factory
from gem_train.engines import Engine, Sampling, make_engine
from gem_train.learner import Learner
from gem_train.metrics_log import MetricsLog, open_wandb, read_metrics, require_wandb
from gem_train.model import build_tiny_model, load_policy, resolve_device
from gem_train.rollout import (
    PROMPT_TOO_LONG,
    EnginePolicy,
    Episode,
    StepClock,
    TurnSample,
    collect,
    derive_seed,
    union_seconds,
)

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


def episode_metrics(episodes: list[Episode], prefix: str = "") -> dict[str, float]:
    """Return, success rate, turns and token counts of a batch of episodes."""
    turns = [t for ep in episodes for t in ep.turns]
    n, nt = max(len(episodes), 1), max(len(turns), 1)
    return {
        f"{prefix}episodes": float(len(episodes)),
        f"{prefix}return": sum(ep.total_return for ep in episodes) / n,
        f"{prefix}success": sum(ep.success for ep in episodes) / n,
        f"{prefix}format_errors": sum(ep.format_error for ep in episodes) / n,
        f"{prefix}turns": len(turns) / n,
        f"{prefix}response_tokens": sum(len(t.response_ids) for t in turns) / nt,
        f"{prefix}prompt_tokens": sum(len(t.prompt_ids) for t in turns) / nt,
        f"{prefix}cut_responses": sum(t.finish_reason == "length" for t in turns) / nt,
        f"{prefix}prompts_too_long": sum(t.finish_reason == PROMPT_TOO_LONG for t in turns) / nt,
    }


def train_seeds(iteration: int, cfg: TrainConfig, wave: int = 0) -> tuple[list[int], list[int]]:
    """Reset seeds and group ids of one iteration's episodes (a group shares its seed).

    ``wave`` counts the extra batches of an iteration that collects ``rollout.turns_per_iter`` turns.
    """
    groups = cfg.rollout.episodes_per_iter // cfg.algo.group_size
    first = cfg.trainer.seed * 1_000_003 + iteration * groups + wave * 1_000_000_007
    seeds = [first + g for g in range(groups) for _ in range(cfg.algo.group_size)]
    return seeds, [wave * groups + g for g in range(groups) for _ in range(cfg.algo.group_size)]


class _Run:
    """The objects of one run, built from the config."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.out = Path(cfg.experiment.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.device = resolve_device(cfg.trainer.device)
        self.make_base_env, wrapped = env_factories(cfg)
        init_path = cfg.model.path if cfg.model.name == "hf" else str(build_tiny_model(
            self.out / "model_init", self.make_base_env, cfg.model.tiny, cfg.model.max_model_len, cfg.trainer.seed,
        ))
        self.checkpoint = latest_checkpoint(self.out) if cfg.trainer.resume else None
        self.state: dict[str, Any] = load_trainer_state(self.checkpoint) if self.checkpoint else {}
        t = cfg.trainer
        self.log = MetricsLog(
            self.out / "metrics.jsonl", console=cfg.experiment.console,
            keep_until=int(self.state["iteration"]) if self.checkpoint else None,
            tensorboard_dir=self.out / "tensorboard" if t.tensorboard else None,
            wandb_run=open_wandb(t.wandb_project, cfg.experiment.name, self.out, dataclasses.asdict(cfg))
            if t.wandb else None,
        )
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
        if cfg.rollout.engine == "vllm":
            v = cfg.rollout.vllm
            options.update(max_model_len=cfg.model.max_model_len, kv_cache_memory_bytes=v.kv_cache_memory_bytes,
                           gpu_memory_utilization=v.gpu_memory_utilization, enforce_eager=v.enforce_eager)
        else:
            options["device"] = self.device
        return make_engine(cfg.rollout.engine, self.engine_path, **options)

    def policy(self, engine: Engine, temperature: float, seed: int) -> EnginePolicy:
        r = self.cfg.rollout
        return EnginePolicy(engine, self.tokenizer, Sampling(temperature, r.top_p if temperature > 0 else 1.0,
                                                             r.max_tokens, seed),
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
    for epoch in range(sft.epochs):
        rng.shuffle(samples)
        losses = [learner.supervised_update(samples[i:i + sft.batch_size])["sft_loss"]
                  for i in range(0, len(samples), sft.batch_size)]
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


def _collect_iteration(run: _Run, engine: Engine, iteration: int
                       ) -> tuple[list[Episode], EnginePolicy, list[tuple[float, float]]]:
    """One iteration's episodes: one batch of ``rollout.episodes_per_iter``, or waves of it until
    ``rollout.turns_per_iter`` turns are in. Also returns the policy and the intervals of the env steps."""
    cfg = run.cfg
    # per (run seed, iteration); the policy derives each request's seed from it and (episode, turn)
    policy = run.policy(engine, cfg.rollout.temperature, derive_seed(cfg.trainer.seed, iteration))
    episodes: list[Episode] = []
    steps: list[tuple[float, float]] = []

    def make_env() -> Any:
        return StepClock(run.make_env(), steps)

    wave = 0
    while wave == 0 or sum(len(ep.turns) for ep in episodes) < (cfg.rollout.turns_per_iter or 0):
        seeds, groups = train_seeds(iteration, cfg, wave)
        if wave > 0:
            # the runner numbers each wave's episodes from 0 again: a fresh seed keeps their draws apart
            policy.sampling = dataclasses.replace(policy.sampling, seed=derive_seed(cfg.trainer.seed, iteration, wave))
        episodes += collect(make_env, policy, seeds, groups, cfg.rollout.concurrency, cfg.env.max_turns)
        wave += 1
    return episodes, policy, steps


def _advantages(cfg: TrainConfig, learner: Learner, episodes: list[Episode]
                ) -> tuple[list[TurnSample], dict[str, Any], dict[str, float]]:
    """The iteration's turns (cut to ``rollout.turns_per_iter``), the learner's inputs for them (advantages;
    for PPO also the critic's values and the GAE targets) and metrics of the critic."""
    a = cfg.algo
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
        advantages = turn_advantages(rewards, [ep.group for ep in episodes], "ppo", a.gamma, a.normalize_std,
                                     values=values, lam=a.gae_lambda)
        _, targets = gae_turn_advantages(rewards, values, a.gamma, a.gae_lambda)
        inputs["old_values"] = flat_values
        inputs["value_targets"] = [x for ep in targets for x in ep]
        metrics["value_mean"] = sum(flat_values) / max(len(flat_values), 1)
        metrics["explained_variance"] = explained_variance(torch.tensor(flat_values),
                                                           torch.tensor(inputs["value_targets"]))
    else:
        advantages = turn_advantages(rewards, [ep.group for ep in episodes], a.name, a.gamma, a.normalize_std)
    inputs["advantages"] = [x for ep in advantages for x in ep]
    if cfg.rollout.turns_per_iter:
        samples = samples[:cfg.rollout.turns_per_iter]
        inputs = {k: v[:cfg.rollout.turns_per_iter] for k, v in inputs.items()}
    return samples, inputs, metrics


def _throughput(samples: list[TurnSample], policy: EnginePolicy, steps: list[tuple[float, float]], rollout_s: float,
                update_s: float, epochs: int) -> dict[str, float]:
    """Tokens/s of rollout and training, and where the rollout's time went: generating, waiting on env steps
    (wall time in which some env steps and no generation ran), and the rest."""
    env_s = union_seconds(steps, minus=policy.generate_intervals)
    trained = sum(len(s.prompt_ids) + len(s.response_ids) for s in samples if s.response_ids) * epochs
    return {
        "rollout_tok_s": policy.generated_tokens / max(rollout_s, 1e-9),
        "train_tok_s": trained / max(update_s, 1e-9),
        "time_generate_s": policy.generate_seconds,
        "time_env_s": env_s,
        # templating, tokenising, the batcher's waits, the runner's bookkeeping
        "time_rollout_other_s": max(rollout_s - policy.generate_seconds - env_s, 0.0),
    }


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run the configured training; returns a summary (first and last evaluation, output folder).

    Writes ``<experiment.output_dir>/metrics.jsonl`` and checkpoints; with
    ``trainer.resume`` a run folder that holds a checkpoint continues from it.
    """
    validate(cfg)
    check_model_path(cfg)
    if cfg.trainer.wandb:
        require_wandb()  # before minutes of model building, not after
    if cfg.trainer.threads and cfg.rollout.engine == "hf":
        # vLLM's CPU backend binds its own OpenMP threads and fails if torch's count was changed before
        torch.set_num_threads(cfg.trainer.threads)
    torch.manual_seed(cfg.trainer.seed)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    run = _Run(cfg)
    t = cfg.trainer
    start_iteration = int(run.state.get("iteration", 0))
    if t.sft.episodes > 0 and not run.state.get("sft_done", False):
        _sft(run)
        # iteration 0: the warm-started model, so a resumed run does not repeat the SFT stage
        save_checkpoint(run.out, 0, run.model, run.tokenizer, None, {"sft_done": True, "env": cfg.env.id})
    engine = run.engine()
    summary: dict[str, Any] = {"output_dir": str(run.out), "resumed_from": str(run.checkpoint or "")}
    try:
        if run.checkpoint is None and t.sft.episodes > 0:
            engine.load_weights(run.model.state_dict())  # the engine started from the pre-SFT folder
        learner = run.learner()
        if run.checkpoint is not None:
            load_optimizer(run.checkpoint, learner.optimizer)
        logged = read_metrics(run.log.path)
        if t.eval_every > 0 and not any(r["kind"] == "eval" and r.get("iteration") == start_iteration for r in logged):
            # a resumed run whose checkpoint iteration was evaluated already does not log that evaluation twice
            summary["first_eval"] = _evaluate(run, engine, start_iteration)
        for iteration in range(start_iteration + 1, t.iterations + 1):
            t0 = time.perf_counter()
            episodes, policy, steps = _collect_iteration(run, engine, iteration)
            t1 = time.perf_counter()
            samples, inputs, critic_metrics = _advantages(cfg, learner, episodes)
            update = learner.update(samples, seed=derive_seed(cfg.trainer.seed, iteration, 1), **inputs)
            t2 = time.perf_counter()
            engine.load_weights(learner.state_dict())
            t3 = time.perf_counter()
            summary["last_train"] = run.log.write(
                "train", iteration=iteration, **episode_metrics(episodes), **update, **critic_metrics,
                **_throughput(samples, policy, steps, t1 - t0, t2 - t1, cfg.algo.epochs),
                turns_trained=float(len(samples)), rollout_s=t1 - t0, update_s=t2 - t1, sync_s=t3 - t2,
                generate_calls=policy.generate_calls,
            )
            if t.eval_every > 0 and (iteration % t.eval_every == 0 or iteration == t.iterations):
                summary["last_eval"] = _evaluate(run, engine, iteration)
            if (t.checkpoint_every > 0 and iteration % t.checkpoint_every == 0) or iteration == t.iterations:
                save_checkpoint(run.out, iteration, run.model, run.tokenizer, learner.optimizer,
                                {"sft_done": True, "env": cfg.env.id}, critic=learner.critic)
    finally:
        engine.close()
        run.log.close()
    records = read_metrics(run.out / "metrics.jsonl")
    summary["curves"] = write_curves(records, run.out)
    if cfg.experiment.console:
        print(f"\n{summary['curves']}\ncurves: {run.out / 'curves.png'}, TensorBoard: {run.out / 'tensorboard'}",
              flush=True)
    return summary
