"""GEM envs in OpenRLHF's multi-turn agent training (tested with openrlhf 0.11.2).

OpenRLHF loads the file given to ``--train.agent_func_path`` and builds its
``AgentExecutor`` class with no arguments. That file needs two lines::

    from gem_integrations.openrlhf import agent_executor
    AgentExecutor = agent_executor("game:GuessTheNumber-v0-easy")

The executor is OpenRLHF's own ``MultiTurnAgentExecutor`` driving a
:class:`GemAgentInstance` (an ``AgentInstanceBase``): ``reset`` starts the GEM episode
and replaces the dataset prompt with the env's first observation (chat-templated),
``step`` plays the generated reply and returns the env's reward and its next
observation, rendered as the template's next user turn (OpenRLHF masks it out of the
loss). The dataset's label column (``--data.label_key``) holds each row's episode
seed, so the ``n_samples_per_prompt`` samples of a row start from the same state.
"""

from __future__ import annotations

import inspect
from typing import Any

from gem.host.hosted import DEFAULT_STEP_TIMEOUT, FAILURE, hosted
from gem_integrations._support import (
    EnvSource,
    env_factory,
    feedback_text,
    first_prompt,
    import_framework,
    require_hook,
)

TESTED = "0.11.2"

agent = import_framework("openrlhf.utils.agent", dist="openrlhf", extra="openrlhf", tested=TESTED)
AgentInstanceBase, MultiTurnAgentExecutor = agent.AgentInstanceBase, agent.MultiTurnAgentExecutor
require_hook(list(inspect.signature(MultiTurnAgentExecutor.__init__).parameters) == ["self", "agent_instance_cls"]
             and "hf_tokenizer" in inspect.signature(MultiTurnAgentExecutor.execute).parameters,
             dist="openrlhf", tested=TESTED, extra="openrlhf",
             what="MultiTurnAgentExecutor(agent_instance_cls).execute(..., hf_tokenizer, llm_engine) changed")


def seed_of(label: Any) -> int | None:
    """The episode seed a label holds: an integer (or its text); an empty label gives None."""
    if label is None or (isinstance(label, str) and not label.strip()):
        return None
    try:
        return int(label)
    except (TypeError, ValueError):
        raise ValueError(f"the label column must hold each row's episode seed (an integer), got {label!r}") from None


class GemAgentInstance(AgentInstanceBase):
    """One GEM episode, as OpenRLHF's ``MultiTurnAgentExecutor`` drives it."""

    #: set per executor by :func:`agent_executor`
    executor: GemAgentExecutor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # behind GEM's host: a step that raises or overruns the executor's step_timeout ends this episode
        # (done, the env's failure reward, extra_logs env_failure 1) and OpenRLHF's batch goes on
        executor = self.executor
        self._hosting = hosted(executor.make_env, host=executor.env_host, step_timeout=executor.step_timeout)
        self.env = self._hosting.__enter__()
        self.total = 0.0
        self.turns = 0

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        obs, _ = await self.env.areset(seed=seed_of(states.get("label")))
        prompt = first_prompt(self.executor.tokenizer, str(obs), self.executor.system_prompt)
        return {"observation": prompt}

    async def step(self, states: dict, **kwargs: Any) -> dict:
        import torch

        obs, reward, terminated, truncated, info = await self.env.astep(states["action_text"])
        self.total += float(reward)
        self.turns += 1
        done = bool(terminated or truncated)
        if done:
            self._hosting.__exit__(None, None, None)
        # vLLM's token ids end with the eos token when it stopped there, while its text omits it
        feedback = "" if done else feedback_text(self.executor.tokenizer, str(obs), reply_closed=True)
        return {
            "rewards": torch.tensor(float(reward)),
            "scores": torch.tensor(self.total),
            "environment_feedback": feedback,
            "done": done,
            "extra_logs": {"env_return": torch.tensor(self.total), "env_turns": torch.tensor(float(self.turns)),
                           "env_success": torch.tensor(float(bool(info.get("correct", False)))),
                           "env_failure": torch.tensor(float(FAILURE in info))},
        }


class GemAgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's ``MultiTurnAgentExecutor`` over a GEM env; subclass with ``env`` set
    (or use :func:`agent_executor`), since OpenRLHF builds it with no arguments."""

    env: EnvSource | None = None
    system_prompt: str | None = None
    #: where the envs run ("thread", "process" or "ray": Ray actors of OpenRLHF's cluster)
    env_host: str = "thread"
    #: seconds a reset or step may take before its episode ends (None: unbounded)
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT

    def __init__(self) -> None:
        # read statically: a factory function set as a class attribute would otherwise bind as a method
        env = inspect.getattr_static(self, "env")
        env = env.__func__ if isinstance(env, staticmethod) else env
        if env is None:
            raise TypeError("GemAgentExecutor needs an env: use agent_executor(env_id) or subclass with env = ...")
        self.make_env = env_factory(env)
        self.tokenizer: Any = None
        super().__init__(type("GemAgentInstance", (GemAgentInstance,), {"executor": self}))

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        # the instance renders the env's text with the policy's chat template
        self.tokenizer = hf_tokenizer
        return await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images)


def agent_executor(env: EnvSource, system_prompt: str | None = None, env_host: str = "thread",
                   step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> type[GemAgentExecutor]:
    """The ``AgentExecutor`` class for an ``--train.agent_func_path`` file (``env_host`` and
    ``step_timeout``: see :class:`GemAgentExecutor`)."""
    return type("AgentExecutor", (GemAgentExecutor,), {"env": env, "system_prompt": system_prompt,
                                                         "env_host": env_host, "step_timeout": step_timeout})


__all__ = ["GemAgentExecutor", "GemAgentInstance", "agent_executor", "seed_of"]
