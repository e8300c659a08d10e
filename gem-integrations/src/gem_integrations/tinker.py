"""GEM envs in the Tinker cookbook's RL loop (tested with tinker 0.38.0, tinker-cookbook 0.6.1).

The cookbook's training loop (``tinker_cookbook.rl.train``) takes an
``RLDatasetBuilder``; :class:`GemDatasetBuilder` is one::

    from gem_integrations.tinker import GemDatasetBuilder
    dataset_builder = GemDatasetBuilder(env_id="game:GuessTheNumber-v0-easy", renderer_name="qwen3_instruct",
                                        model_name_for_tokenizer="Qwen/Qwen3-4B-Instruct-2507",
                                        batch_size=16, group_size=8)

Each batch holds ``batch_size`` :class:`GemEnvGroupBuilder`s; a group is
``group_size`` episodes of one seed (GRPO centres rewards within it). An episode is a
:class:`GemMessageEnv` (the cookbook's message-level ``MessageEnv``) inside the
cookbook's own ``EnvFromMessageEnv``, so the model's renderer does the chat format, the
stop sequences and the parsing, and the cookbook's data processing keeps only the
sampled tokens in the loss. A reply the renderer cannot parse (no stop sequence) ends
the episode with GEM's format-error reward, -0.1.

Builders hold only strings and numbers, so they pickle (the cookbook may ship them to
rollout workers); the env, the tokenizer and the renderer are made in ``make_envs``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from gem.conventions import FORMAT_ERROR_REWARD
from gem.host.hosted import DEFAULT_STEP_TIMEOUT, FAILURE, hosted
from gem_integrations._support import env_factory, import_framework, require_hook

TESTED = "0.6.1"

chz = import_framework("chz", dist="tinker-cookbook", extra="tinker", tested=TESTED)
types = import_framework("tinker_cookbook.rl.types", dist="tinker-cookbook", extra="tinker", tested=TESTED)
message_env = import_framework("tinker_cookbook.rl.message_env", dist="tinker-cookbook", extra="tinker",
                               tested=TESTED)
from tinker_cookbook.renderers import get_renderer, get_text_content  # noqa: E402
from tinker_cookbook.tokenizer_utils import get_tokenizer  # noqa: E402

require_hook("extra" in inspect.signature(types.Env.step).parameters
             and "failed_parse_reward" in inspect.signature(message_env.EnvFromMessageEnv.__init__).parameters,
             dist="tinker-cookbook", tested=TESTED, extra="tinker",
             what="Env.step(action, *, extra) or EnvFromMessageEnv(renderer, message_env, failed_parse_reward) changed")


class GemMessageEnv(message_env.MessageEnv):
    """One GEM episode at the message level: the assistant's text is the action.

    ``env``: a GEM env, or a :class:`gem.host.hosted.HostedEnv` (what :class:`GemEnvGroupBuilder`
    gives: a step that raises or overruns its step timeout then ends the episode, with
    ``env_failure`` 1 in the step's metrics); ``hosting``: the context that handle came from,
    left when the episode ends (instead of closing the env)."""

    def __init__(self, env: Any, seed: int | None, system_prompt: str | None = None, hosting: Any = None) -> None:
        self.env, self.seed, self.system_prompt, self.hosting = env, seed, system_prompt, hosting
        self.messages: list[dict[str, Any]] = []
        self.total = 0.0

    async def initial_observation(self) -> list[dict[str, Any]]:
        obs, _ = await self.env.areset(seed=self.seed)
        self.messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        self.messages.append({"role": "user", "content": str(obs)})
        return list(self.messages)

    async def step(self, message: dict[str, Any]) -> message_env.MessageStepResult:
        action = get_text_content(message)
        obs, reward, terminated, truncated, info = await self.env.astep(action)
        self.total += float(reward)
        done = bool(terminated or truncated)
        self.messages += [{"role": "assistant", "content": action}, {"role": "user", "content": str(obs)}]
        metrics = {"env_return": self.total} if done else {}
        if done and "correct" in info:
            metrics["env_success"] = float(bool(info["correct"]))
        if done:
            metrics["env_failure"] = float(FAILURE in info)
            if self.hosting is not None:
                self.hosting.__exit__(None, None, None)
            else:
                self.env.close()
        return message_env.MessageStepResult(reward=float(reward), episode_done=done,
                                             next_messages=list(self.messages), metrics=metrics)


class GemEnvGroupBuilder(types.EnvGroupBuilder):
    """``group_size`` episodes of ``env_id`` from one seed (a GRPO group), each env behind GEM's
    host: ``env_host`` ``"thread"``, ``"process"`` or ``"ray"``, each reset or step bounded by
    ``step_timeout`` seconds."""

    def __init__(self, env_id: str, seed: int, group_size: int, renderer_name: str, model_name_for_tokenizer: str,
                 system_prompt: str | None = None, env_host: str = "thread",
                 step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> None:
        self.env_id, self.seed, self.group_size = env_id, int(seed), int(group_size)
        self.renderer_name, self.model_name_for_tokenizer = renderer_name, model_name_for_tokenizer
        self.system_prompt = system_prompt
        self.env_host, self.step_timeout = env_host, step_timeout

    async def make_envs(self) -> Sequence[types.Env]:
        renderer = get_renderer(self.renderer_name, get_tokenizer(self.model_name_for_tokenizer))
        make = env_factory(self.env_id)
        envs = []
        for _ in range(self.group_size):
            hosting = hosted(make, host=self.env_host, step_timeout=self.step_timeout)
            env = GemMessageEnv(hosting.__enter__(), self.seed, self.system_prompt, hosting=hosting)
            envs.append(message_env.EnvFromMessageEnv(renderer, env, failed_parse_reward=FORMAT_ERROR_REWARD))
        return envs

    def logging_tags(self) -> list[str]:
        return [self.env_id.split(":", 1)[0], self.env_id]


class GemRLDataset(types.RLDataset):
    """Batches of :class:`GemEnvGroupBuilder`: batch ``i`` uses seeds ``first_seed + i * batch_size + j``."""

    def __init__(self, n_batches: int, batch_size: int, first_seed: int = 0, **group: Any) -> None:
        self.n_batches, self.batch_size, self.first_seed, self.group = n_batches, batch_size, first_seed, group

    def get_batch(self, index: int) -> Sequence[GemEnvGroupBuilder]:
        if not 0 <= index < self.n_batches:
            raise IndexError(f"batch {index} out of range (the dataset has {self.n_batches})")
        start = self.first_seed + index * self.batch_size
        return [GemEnvGroupBuilder(seed=start + j, **self.group) for j in range(self.batch_size)]

    def __len__(self) -> int:
        return self.n_batches


@chz.chz
class GemDatasetBuilder(types.RLDatasetBuilder):
    """The cookbook's dataset builder for a GEM env id; a test set of ``test_groups``
    groups (single episodes) uses seeds after the training ones."""

    env_id: str
    renderer_name: str
    model_name_for_tokenizer: str
    batch_size: int = 8
    group_size: int = 4
    n_batches: int = 100
    seed: int = 0
    test_groups: int = 0
    system_prompt: str | None = None
    env_host: str = "thread"
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT

    async def __call__(self) -> tuple[GemRLDataset, GemRLDataset | None]:
        group = {"env_id": self.env_id, "renderer_name": self.renderer_name,
                 "model_name_for_tokenizer": self.model_name_for_tokenizer, "system_prompt": self.system_prompt,
                 "env_host": self.env_host, "step_timeout": self.step_timeout}
        train = GemRLDataset(self.n_batches, self.batch_size, self.seed, group_size=self.group_size, **group)
        test = None
        if self.test_groups:
            test = GemRLDataset(1, self.test_groups, self.seed + self.n_batches * self.batch_size, group_size=1,
                                **group)
        return train, test


__all__ = ["GemDatasetBuilder", "GemEnvGroupBuilder", "GemMessageEnv", "GemRLDataset"]
