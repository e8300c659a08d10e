"""GEM envs as SkyRL envs (tested with skyrl-gym 0.4.0, the env API of skyrl-train 0.3.1).

Importing this module registers :class:`GemSkyRLEnv` with skyrl-gym as ``gem``.
skyrl-train's generator builds one env per trajectory with
``skyrl_gym.make(row["env_class"], env_config=cfg.environment.skyrl_gym[env_class], extras=...)``,
where the extras are the dataset row's columns other than ``prompt`` and ``env_class``
(plus ``max_turns``, which the generator sets from ``generator.max_turns``). So each row
of :func:`gem_rows` names the GEM env and the reset seed of its episode::

    from gem_integrations.skyrl import gem_rows
    rows = gem_rows("game:GuessTheNumber-v0-easy", seeds=range(64))
    # [{"prompt": [...], "env_class": "gem", "env_id": "game:GuessTheNumber-v0-easy", "seed": 0}, ...]

and the generator plays it: ``init(prompt)`` resets the GEM env with the row's seed and
returns the live first observation as the user turn (the row's system messages kept);
each ``step(reply)`` plays the reply as the action and returns the env's reward, its
next observation as a user message, and ``done`` once the env terminates or truncates
or ``max_turns`` replies were played. skyrl-train's ``generator.max_turns`` defaults
to 1, so set it to the game's turn limit for multi-turn play.

The module imports skyrl-gym only; skyrl-train (Python 3.12, CUDA) imports it in its
Ray workers, which must import this module before the generator runs (see
``examples/skyrl``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from gem_integrations._support import EnvSource, env_factory, import_framework, require_hook

TESTED = "0.4.0"

skyrl_gym = import_framework("skyrl_gym", dist="skyrl-gym", extra="skyrl", tested=TESTED)
from skyrl_gym.envs import registration  # noqa: E402  (after the guarded import above)
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput  # noqa: E402

require_hook(list(inspect.signature(BaseTextEnv.init).parameters) == ["self", "prompt"]
             and {"observations", "reward", "done", "metadata"} <= set(BaseTextEnvStepOutput.__annotations__),
             dist="skyrl-gym", tested=TESTED, extra="skyrl",
             what="BaseTextEnv.init(prompt) / BaseTextEnvStepOutput(observations, reward, done, metadata) changed")
require_hook(callable(getattr(registration, "register", None)) and isinstance(getattr(registration, "registry", None),
                                                                               dict),
             dist="skyrl-gym", tested=TESTED, extra="skyrl", what="skyrl_gym.envs.registration.register changed")

#: the skyrl-gym id (a dataset row's ``env_class``) this module registers
ENV_CLASS = "gem"


class GemSkyRLEnv(BaseTextEnv):
    """One GEM episode as a skyrl-gym text env.

    ``env_config`` (``environment.skyrl_gym.gem`` in skyrl-train's config) may give a
    default ``env_id``; ``extras`` (a dataset row) gives ``env_id``, ``seed`` and the
    generator's ``max_turns``. ``env``: a fixed GEM env source (an id, env or factory),
    which :func:`register_env` binds; a row's ``env_id`` is then not needed.
    """

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None,
                 env: EnvSource | None = None) -> None:
        super().__init__()
        extras = extras or {}
        source = env if env is not None else extras.get("env_id") or (env_config or {}).get("env_id")
        if not source:
            raise ValueError("the gem skyrl env needs a GEM env id: give each dataset row an 'env_id' column "
                             "(gem_integrations.skyrl.gem_rows writes one) or set environment.skyrl_gym.gem.env_id")
        self.env_id = source if isinstance(source, str) else getattr(source, "env_id", None)
        self.seed = None if extras.get("seed") is None else int(extras["seed"])
        cap = extras.get("max_turns")
        self.max_turns = int(cap) if cap else None
        self._env: Any = env_factory(source)()
        self.total, self.done, self.terminated = 0.0, False, False

    @property
    def gem_env(self) -> Any:
        """The GEM env this episode plays (``None`` once closed)."""
        return self._env

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        obs, info = self._env.reset(seed=self.seed)
        self.turns, self.total, self.done, self.terminated = 0, 0.0, False, False
        system = [dict(m) for m in prompt or [] if isinstance(m, Mapping) and m.get("role") == "system"]
        return [*system, {"role": "user", "content": str(obs)}], {"info": info}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self.done:
            return BaseTextEnvStepOutput(observations=[], reward=0.0, done=True, metadata={"info": {}})
        obs, reward, terminated, truncated, info = self._env.step(str(action))
        self.turns += 1
        self.total += float(reward)
        self.terminated = bool(terminated)
        out_of_turns = self.max_turns is not None and self.turns >= self.max_turns
        self.done = bool(terminated or truncated or out_of_turns)
        return BaseTextEnvStepOutput(
            observations=[] if self.done else [{"role": "user", "content": str(obs)}],
            reward=float(reward), done=self.done,
            metadata={"info": info, "terminated": bool(terminated), "truncated": bool(truncated) or
                      (out_of_turns and not terminated)})

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "return": self.total, "terminated": float(self.terminated)}

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def register_env(env_class: str = ENV_CLASS, env: EnvSource | None = None) -> None:
    """Register :class:`GemSkyRLEnv` with skyrl-gym as ``env_class`` (a no-op if already there).

    With ``env``, every episode of ``env_class`` plays that GEM env (rows then need only
    ``seed``); a callable entry point like that lives in this process's registry only, so
    each Ray worker must call this too.
    """
    if env_class in registration.registry:
        return
    entry = (f"{__name__}:GemSkyRLEnv" if env is None else functools.partial(GemSkyRLEnv, env=env))
    registration.register(id=env_class, entry_point=entry)


def gem_rows(env: str, seeds: Iterable[int], system_prompt: str | None = None,
             env_class: str = ENV_CLASS) -> list[dict[str, Any]]:
    """skyrl-train dataset rows, one per seed: ``prompt``, ``env_class``, ``env_id``, ``seed``.

    The prompt is the env's first observation for that seed (skyrl-train filters rows
    by the prompt's length; the env's ``init`` replaces it by the live observation).
    Written as JSON lines or parquet, they are what skyrl-train's ``PromptDataset`` reads.
    """
    make = env_factory(env)
    rows = []
    for seed in (int(s) for s in seeds):
        e = make()
        try:
            obs, _ = e.reset(seed=seed)
        finally:
            e.close()
        prompt = [{"role": "system", "content": system_prompt}] if system_prompt else []
        prompt.append({"role": "user", "content": str(obs)})
        rows.append({"prompt": prompt, "env_class": env_class, "env_id": env, "seed": seed})
    return rows


register_env()

__all__ = ["ENV_CLASS", "GemSkyRLEnv", "gem_rows", "register_env"]
