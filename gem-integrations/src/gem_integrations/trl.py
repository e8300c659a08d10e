"""GEM envs in TRL's ``GRPOTrainer`` (tested with trl 1.16.0), through either of its hooks.

``rollout_func``: :class:`GemRollout` plays whole multi-turn episodes. Every turn's
generated token ids (and the sampler's logprobs, where the generation backend gives
them) are kept as they came; the env's replies, rendered with the chat template, are
spliced in between and masked out of the loss with ``env_mask``. The episode's return
reaches GRPO through the :func:`env_reward` reward function::

    from gem_integrations.trl import GemRollout, env_reward, gem_dataset
    trainer = GRPOTrainer(model, reward_funcs=env_reward, args=GRPOConfig(...),
                          train_dataset=gem_dataset("game:GuessTheNumber-v0-easy", seeds=range(64)),
                          rollout_func=GemRollout("game:GuessTheNumber-v0-easy"))

``environment_factory``: :func:`tool_environment` gives TRL a class whose public
``act`` method is the tool the model calls to play a move; ``get_reward`` returns the
episode's return::

    trainer = GRPOTrainer(model, args=GRPOConfig(max_tool_calling_iterations=8, ...),
                          train_dataset=gem_dataset(ENV_ID, seeds=range(64), for_tools=True),
                          environment_factory=tool_environment(ENV_ID))

Seeds come from the dataset, so the ``num_generations`` copies of a row that TRL's
sampler makes (one GRPO group) start from the same state. ``rollout_func`` receives
only the ``prompt`` column, so :func:`gem_dataset` writes each row's seed into its
prompt message as well as into the ``seed`` column.

Generation goes through the trainer's own per-turn generator, so it is vLLM
(``use_vllm=True``; logprobs kept) or ``transformers`` ``generate`` (no sampler
logprobs: TRL then computes them itself), whatever the trainer was configured with.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable, Iterable
from typing import Any

from gem.host.hosted import DEFAULT_STEP_TIMEOUT, FAILURE, HostedEnv, hosted
from gem_integrations._support import (
    EnvSource,
    encode,
    env_factory,
    feedback_text,
    first_prompt,
    import_framework,
    require_hook,
)

TESTED = "1.16.0"

trl = import_framework("trl", dist="trl", extra="trl", tested=TESTED)
from trl import GRPOTrainer  # noqa: E402  (after the guarded import above)

_init = inspect.signature(GRPOTrainer.__init__).parameters
require_hook("rollout_func" in _init and "environment_factory" in _init, dist="trl", tested=TESTED, extra="trl",
             what="GRPOTrainer takes no rollout_func / environment_factory argument")
_generate = getattr(GRPOTrainer, "_generate_single_turn", None)
require_hook(_generate is not None and list(inspect.signature(_generate).parameters)[1:5]
             == ["prompt_ids", "images", "multimodal_fields", "num_generations"],
             dist="trl", tested=TESTED, extra="trl",
             what="GRPOTrainer._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations) changed")

#: the key of a prompt message (and the dataset column) that holds the episode's seed
SEED_KEY = "seed"


def gem_dataset(env: EnvSource, seeds: Iterable[int], for_tools: bool = False,
                instruction: str = "Play the game. Make each move by calling the `act` tool.") -> Any:
    """A ``datasets.Dataset`` with one row per seed: ``prompt`` and ``seed`` columns.

    For ``rollout_func`` the prompt is the env's first observation for that seed (it is
    what the model sees; the rollout resets the env with the seed it carries). With
    ``for_tools`` the prompt is ``instruction``, and TRL appends the observation that
    :class:`GemToolEnv.reset` returns.
    """
    from datasets import Dataset

    seeds = [int(s) for s in seeds]
    if for_tools:
        prompts = [[{"role": "user", "content": instruction}] for _ in seeds]
    else:
        make = env_factory(env)
        prompts = []
        for seed in seeds:
            e = make()
            try:
                obs, _ = e.reset(seed=seed)
            finally:
                e.close()
            prompts.append([{"role": "user", "content": str(obs), SEED_KEY: seed}])
    return Dataset.from_dict({"prompt": prompts, SEED_KEY: seeds})


def env_reward(env_return: list[float], **kwargs: Any) -> list[float]:
    """The reward function for :class:`GemRollout`: each episode's return, as the env gave it."""
    return [float(r) for r in env_return]


def _seed_of(prompt: Any) -> int:
    if isinstance(prompt, list):
        for message in prompt:
            if isinstance(message, dict) and message.get(SEED_KEY) is not None:
                return int(message[SEED_KEY])
    raise ValueError("GemRollout needs each prompt to carry its episode seed (a message key 'seed'), so a GRPO group "
                     "shares its start; build the dataset with gem_integrations.trl.gem_dataset(env, seeds)")


class GemRollout:
    """A ``rollout_func`` that plays one GEM episode per prompt, all episodes batched per turn.

    ``env``: an id, an env (spawned per episode) or a factory. ``system_prompt``: an
    optional system message before the first observation. An episode ends when the env
    says so or when its completion reaches the trainer's ``max_completion_length``
    (counting the env's tokens too: they share the sequence).

    Each env runs behind GEM's host (``env_host``: ``"thread"``, ``"process"`` or ``"ray"``):
    a reset or step that raises or overruns ``step_timeout`` seconds ends that episode
    (the env's failure reward; ``env_failure`` names the cause) and the batch goes on.

    After each call ``last_batch`` holds what was returned, for inspection.
    """

    def __init__(self, env: EnvSource, system_prompt: str | None = None, env_host: str = "thread",
                 step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> None:
        self.make_env = env_factory(env)
        self.system_prompt = system_prompt
        self.env_host, self.step_timeout = env_host, step_timeout
        self.last_batch: dict[str, Any] | None = None

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        seeds = [_seed_of(p) for p in prompts]
        tok = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        budget = int(trainer.args.max_completion_length)
        eos_ids = set(trainer.eos_token_ids)
        with contextlib.ExitStack() as hosting:
            episodes = [_Episode(hosting.enter_context(hosted(self.make_env, host=self.env_host,
                                                              step_timeout=self.step_timeout)), seed)
                        for seed in seeds]
            self._play(episodes, trainer, tok, budget, eos_ids)
        with_logprobs = all(ep.logprobs is not None for ep in episodes)
        self.last_batch = {
            "prompt_ids": [ep.prompt_ids for ep in episodes],
            "completion_ids": [ep.completion for ep in episodes],
            "logprobs": [ep.logprobs for ep in episodes] if with_logprobs else None,
            "env_mask": [ep.mask for ep in episodes],
            "env_return": [ep.total for ep in episodes],
            "env_turns": [ep.turns for ep in episodes],
            "env_seed": [ep.seed for ep in episodes],
            "env_failure": [ep.failure for ep in episodes],
        }
        return self.last_batch

    def _play(self, episodes: list[_Episode], trainer: Any, tok: Any, budget: int, eos_ids: set[int]) -> None:
        for ep in episodes:
            obs, info = ep.env.reset(seed=ep.seed)
            ep.prompt_ids = encode(tok, first_prompt(tok, obs, self.system_prompt))
            if FAILURE in info:  # the episode could not begin: it generates nothing
                ep.done, ep.failure = True, str(info[FAILURE]["type"])
        while _any_running(trainer, episodes):
            running = [ep for ep in episodes if not ep.done]
            # a process whose episodes are over keeps generating (and discarding) with the others,
            # since distributed generation (vLLM, sharded weights) is a collective call
            batch = running or episodes[:1]
            ids, logprobs = trainer._generate_single_turn([ep.context() for ep in batch], None, {}, 1)
            for k, ep in enumerate(running):
                ep.play(ids[k], None if logprobs is None else logprobs[k], tok, eos_ids, budget)


def _any_running(trainer: Any, episodes: list[_Episode]) -> bool:
    import torch

    running = sum(not ep.done for ep in episodes)
    if trainer.accelerator.num_processes > 1:
        running = int(trainer.accelerator.gather(torch.tensor([running], device=trainer.accelerator.device)).sum())
    return running > 0


class _Episode:
    """One rollout's tokens: completion = reply, env text, reply, ...; mask 1 on the replies."""

    def __init__(self, env: Any, seed: int) -> None:
        self.env, self.seed = env, seed
        self.prompt_ids: list[int] = []
        self.completion: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] | None = []
        self.total, self.turns, self.done = 0.0, 0, False
        self.failure = ""  # what ended the episode when the env failed (gem.host's failure type)

    def context(self) -> list[int]:
        return self.prompt_ids + self.completion

    def play(self, reply: list[int], logprobs: list[float] | None, tok: Any, eos_ids: set[int], budget: int) -> None:
        reply = list(reply)[: budget - len(self.completion)]
        self.completion += reply
        self.mask += [1] * len(reply)
        if logprobs is None or self.logprobs is None:
            self.logprobs = None
        else:
            self.logprobs += [float(x) for x in logprobs[: len(reply)]]
        obs, reward, terminated, truncated, info = self.env.step(tok.decode(reply, skip_special_tokens=True))
        self.total += float(reward)
        self.turns += 1
        if FAILURE in info:
            self.failure = str(info[FAILURE]["type"])
        if terminated or truncated or len(self.completion) >= budget:
            self.done = True
            return
        closed = bool(reply) and reply[-1] in eos_ids
        env_ids = encode(tok, feedback_text(tok, str(obs), reply_closed=closed))[: budget - len(self.completion)]
        self.completion += env_ids
        self.mask += [0] * len(env_ids)
        if self.logprobs is not None:
            self.logprobs += [0.0] * len(env_ids)
        self.done = len(self.completion) >= budget


class GemToolEnv:
    """A GEM env as a TRL ``environment_factory`` environment: the model plays by calling ``act``.

    Subclass with ``env`` set (or use :func:`tool_environment`). TRL builds instances
    with no arguments, calls ``reset(**row)`` before each rollout, exposes the public
    methods as tools and calls ``get_reward()`` when the rollout is over.
    """

    #: an env id, env or factory; set by :func:`tool_environment`
    env: EnvSource | None = None
    #: where the env runs ("thread", "process", "ray") and how long a move may take (gem.host): a move that
    #: raises or overruns ends the game, and the rollout goes on
    env_host: str = "thread"
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT

    def __init__(self) -> None:
        if self.env is None:
            raise TypeError("GemToolEnv needs an env: use tool_environment(env_id) or subclass with env = ...")
        self._make = env_factory(self.env)
        self._env: Any = None
        self.total, self.turns, self.done = 0.0, 0, False

    def reset(self, **row: Any) -> str:
        if self._env is not None:
            self._env.close()
        self._env = HostedEnv(self._make, host=self.env_host, step_timeout=self.step_timeout)
        seed = row.get(SEED_KEY)
        obs, _ = self._env.reset(seed=None if seed is None else int(seed))
        self.total, self.turns, self.done = 0.0, 0, False
        return "\n" + str(obs)

    def act(self, action: str) -> str:
        """Play one move in the game.

        Args:
            action: The move, written the way the game asks for it (for example \\boxed{5}).

        Returns:
            What the game answers, and whether the game is over.
        """
        if self.done:
            return "The game is over; no more moves are accepted."
        obs, reward, terminated, truncated, _ = self._env.step(str(action))
        self.total += float(reward)
        self.turns += 1
        self.done = bool(terminated or truncated)
        return str(obs) + ("\nThe game is over." if self.done else "")

    def get_reward(self) -> float:
        """The episode's return. A rollout that never called ``act`` played the empty
        move, which the env scores (a format error in GEM's convention)."""
        if self._env is not None and self.turns == 0 and not self.done:
            self.act("")
        return self.total


def tool_environment(env: EnvSource, env_host: str = "thread",
                     step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> Callable[[], GemToolEnv]:
    """An ``environment_factory`` for ``env`` (a class TRL instantiates with no arguments)."""
    name = env if isinstance(env, str) else getattr(env, "env_id", None) or "env"
    return type("GemToolEnv", (GemToolEnv,), {"env": env, "env_host": env_host, "step_timeout": step_timeout,
                                              "__doc__": f"GEM {name} played through the act tool."})


def action_bias(env: EnvSource, tokenizer: Any, samples: int = 64, strength: float = 8.0, seed: int = 0,
                wrap: Callable[[str], str] | None = None) -> list[list[Any]]:
    """A ``sequence_bias`` (for ``GRPOConfig(generation_kwargs={"sequence_bias": ...})``) that
    steers an untrained model towards the env's action format, so that a smoke test with a
    tiny random model plays several turns instead of ending every episode on a format error.

    Each of ``samples`` random actions of the env, followed by eos, is biased token by token:
    a longer matching prefix gets a larger bias, so a started action is finished. ``wrap``
    turns an action into the text to bias towards (e.g. a tool call that plays it).
    """
    env_ = env_factory(env)()
    biases: dict[tuple[int, ...], float] = {}
    try:
        env_.reset(seed=seed)
        for _ in range(samples):
            action = env_.sample_random_action()
            ids = [*encode(tokenizer, wrap(action) if wrap else action), tokenizer.eos_token_id]
            for k in range(len(ids)):
                key = tuple(ids[: k + 1])
                biases[key] = max(biases.get(key, 0.0), strength * (k + 1))
    finally:
        env_.close()
    return [[list(key), bias] for key, bias in biases.items()]


def tool_call_text(action: str) -> str:
    """The text of a call to ``act`` playing ``action``, as the template of :func:`tool_chat_template`
    writes tool calls (for :func:`action_bias`'s ``wrap`` in smoke tests with an untrained model)."""
    return "<tool_call>\n" + json.dumps({"name": "act", "arguments": {"action": action}}) + "\n</tool_call>"


def tool_chat_template(name: str = "qwen3") -> str:
    """One of the tool-calling chat templates TRL ships (``trl/chat_templates``), for
    tokenizers whose own template cannot render tool calls."""
    from importlib.resources import files

    return (files("trl") / "chat_templates" / f"{name}.jinja").read_text()


__all__ = ["GemRollout", "GemToolEnv", "action_bias", "env_reward", "gem_dataset", "tool_call_text",
           "tool_chat_template", "tool_environment"]
