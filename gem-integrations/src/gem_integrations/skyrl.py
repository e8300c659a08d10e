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

Each step's reward is that turn's own: skyrl-train's generator puts it on the turn's last
sampled token (token-level rewards), so ReBN's turn-level credit survives. Where skyrl-train
imports, this module also registers ``gem_rebn`` in its ``AdvantageEstimatorRegistry``
(``trainer.algorithm.advantage_estimator=gem_rebn``, ``trainer.algorithm.gamma`` the turn-level
gamma): gem-train's ReBN over the turns of each trajectory. SkyRL's ``response_mask`` covers the
env's tokens too, so the turns are the runs of the *loss* mask, which skyrl-train's registry
call does not pass: train with :func:`gem_ppo_exp`'s experiment (``examples/skyrl/gem_skyrl.py
train``), whose trainer hands it over.

The module needs skyrl-gym only; skyrl-train imports it in its Ray workers, which must import
this module before the generator runs (see ``examples/skyrl``).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from gem.host.hosted import DEFAULT_STEP_TIMEOUT, hosted
from gem_integrations._support import EnvSource, env_factory, import_framework, require_hook
from gem_integrations.turns import rebn_token_advantages

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
    default ``env_id`` and ``wrappers``; ``extras`` (a dataset row) gives ``env_id``,
    ``wrappers`` (GEM wrapper names, e.g. ``"python_tool"``), ``seed`` and the generator's
    ``max_turns``. ``env``: a fixed GEM env source (an id, env or factory),
    which :func:`register_env` binds; a row's ``env_id`` is then not needed.

    The GEM env runs behind GEM's host (:func:`gem.host.hosted.hosted`): ``env_host``
    (``"thread"``, ``"process"`` or ``"ray"``: a Ray actor of skyrl-train's cluster, so the
    envs spread over its nodes) and ``step_timeout`` (seconds, default 300) come from the row
    or ``env_config``. A step that raises or overruns ends that episode (done, the env's
    failure reward, ``metadata["info"]["failure"]`` naming the cause) and the generator goes on.
    """

    #: the env source a :func:`register_env` subclass binds (a staticmethod there, so that a
    #: function or class stays unbound)
    bound_env: EnvSource | None = None

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None,
                 env: EnvSource | None = None) -> None:
        super().__init__()
        extras = extras or {}
        env = env if env is not None else self.bound_env
        source = env if env is not None else extras.get("env_id") or (env_config or {}).get("env_id")
        if not source:
            raise ValueError("the gem skyrl env needs a GEM env id: give each dataset row an 'env_id' column "
                             "(gem_integrations.skyrl.gem_rows writes one) or set environment.skyrl_gym.gem.env_id")
        self.env_id = source if isinstance(source, str) else getattr(source, "env_id", None)
        self.seed = None if extras.get("seed") is None else int(extras["seed"])
        cap = extras.get("max_turns")
        self.max_turns = int(cap) if cap else None
        config = {**(env_config or {}), **extras}
        wrappers = extras.get("wrappers") or (env_config or {}).get("wrappers") or None
        timeout = config.get("step_timeout", DEFAULT_STEP_TIMEOUT)
        self._hosting = hosted(env_factory(source, wrappers), host=config.get("env_host") or "thread",
                               step_timeout=None if timeout is None else float(timeout))
        self._env: Any = self._hosting.__enter__()
        self.total, self.done, self.terminated = 0.0, False, False

    @property
    def gem_env(self) -> Any:
        """The GEM env this episode plays, where it lives in this process (``None`` once closed, or
        when it runs in a worker process or a Ray actor)."""
        return None if self._env is None else self._env.local_env

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
            self._env = None
            self._hosting.__exit__(None, None, None)


def register_env(env_class: str = ENV_CLASS, env: EnvSource | None = None) -> None:
    """Register :class:`GemSkyRLEnv` with skyrl-gym as ``env_class`` (a no-op if already there).

    With ``env``, every episode of ``env_class`` plays that GEM env (rows then need only
    ``seed``); a callable entry point like that lives in this process's registry only, so
    each Ray worker must call this too.
    """
    if env_class in registration.registry:
        return
    # a class, not a partial: skyrl-gym's metrics aggregation (the generator's rollout metrics)
    # calls entry_point.aggregate_metrics
    entry = (f"{__name__}:GemSkyRLEnv" if env is None
             else type(f"GemSkyRLEnv_{env_class}", (GemSkyRLEnv,), {"bound_env": staticmethod(env)}))
    registration.register(id=env_class, entry_point=entry)


def gem_rows(env: str, seeds: Iterable[int], system_prompt: str | None = None,
             env_class: str = ENV_CLASS, wrappers: str | None = None) -> list[dict[str, Any]]:
    """skyrl-train dataset rows, one per seed: ``prompt``, ``env_class``, ``env_id``, ``seed``
    (and ``wrappers`` when given, e.g. ``"python_tool"``).

    The prompt is the env's first observation for that seed (skyrl-train filters rows
    by the prompt's length; the env's ``init`` replaces it by the live observation).
    Written as JSON lines or parquet, they are what skyrl-train's ``PromptDataset`` reads.
    """
    make = env_factory(env, wrappers or None)
    rows = []
    for seed in (int(s) for s in seeds):
        e = make()
        try:
            obs, _ = e.reset(seed=seed)
        finally:
            e.close()
        prompt = [{"role": "system", "content": system_prompt}] if system_prompt else []
        prompt.append({"role": "user", "content": str(obs)})
        rows.append({"prompt": prompt, "env_class": env_class, "env_id": env, "seed": seed,
                     **({"wrappers": wrappers} if wrappers else {})})
    return rows


#: the advantage estimator name ``trainer.algorithm.advantage_estimator`` selects ReBN by
REBN_ESTIMATOR = "gem_rebn"

# the batch's loss mask, set by GemRayPPOTrainer around skyrl-train's estimator call (which
# passes the estimator only the response mask); a context variable, so nothing outlives the call
_LOSS_MASK: ContextVar[Any] = ContextVar("gem_skyrl_loss_mask", default=None)


def rebn_estimator(*, token_level_rewards: Any, response_mask: Any, gamma: float = 1.0, grpo_norm_by_std: bool = True,
                   loss_mask: Any = None, **_: Any) -> tuple[Any, Any]:
    """``gem_rebn`` in skyrl-train's registry: (advantages, returns), both the ReBN advantages.

    Each trajectory's turns are the runs of 1s in its loss mask (the sampled tokens); each
    turn's reward is the token rewards from its first token up to the next turn's (the
    generator puts it on the turn's last token). ``gamma`` is the turn-level discount;
    ``grpo_norm_by_std`` (skyrl-train's switch for dividing by the std; true by default) divides
    by the batch's std as ReBN does, or leaves the mean subtracted only.
    """
    mask = loss_mask if loss_mask is not None else _LOSS_MASK.get()
    if mask is None:
        raise ValueError(f"{REBN_ESTIMATOR} needs the loss mask to find the turns (skyrl-train's response mask covers "
                         "the env's tokens too): train with gem_integrations.skyrl.gem_ppo_exp() "
                         "(examples/skyrl/gem_skyrl.py train) or pass loss_mask=")
    if tuple(mask.shape) != tuple(token_level_rewards.shape):
        shapes = f"loss mask {tuple(mask.shape)} and rewards {tuple(token_level_rewards.shape)}"
        raise ValueError(f"{REBN_ESTIMATOR}: {shapes} differ (generator.step_wise_trajectories is not supported)")
    # a row with no sampled token (the padding rows skyrl-train's pad_batch adds) has no turn: it takes no
    # part in the batch statistics and gets 0
    advantages = rebn_token_advantages(token_level_rewards, mask, float(gamma), normalize_std=bool(grpo_norm_by_std))
    return advantages, advantages


def check_rebn_config(cfg: Any) -> None:
    """Refuse skyrl-train settings under which ``gem_rebn`` would not see per-turn rewards."""
    if cfg.trainer.algorithm.advantage_estimator != REBN_ESTIMATOR:
        return
    gen = cfg.generator
    if gen.get("step_wise_trajectories", False):
        # skyrl-train then estimates on each trajectory's last step only and copies it to every step
        raise ValueError(f"{REBN_ESTIMATOR} needs generator.step_wise_trajectories=false")
    template = gen.get("chat_template") or {}
    if gen.get("use_conversation_multi_turn", True) and template.get("name_or_path"):
        # a custom template makes the generator re-tokenise the chat, a path that returns only the
        # last step's reward (skyrl-train 0.3.1, SkyRLGymGenerator._build_per_token_rewards)
        raise ValueError(f"{REBN_ESTIMATOR} needs generator.chat_template.name_or_path unset (with a custom chat "
                         "template skyrl-train keeps only the last turn's reward)")


def register_estimator() -> bool:
    """Register ``gem_rebn`` in skyrl-train's ``AdvantageEstimatorRegistry`` (False where skyrl-train
    is not installed; a no-op if already there)."""
    if importlib.util.find_spec("skyrl_train") is None:
        return False
    from skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry

    if REBN_ESTIMATOR not in AdvantageEstimatorRegistry.list_available():
        AdvantageEstimatorRegistry.register(REBN_ESTIMATOR, rebn_estimator)
    return True


@functools.cache
def gem_trainer_class() -> type:
    """skyrl-train's ``RayPPOTrainer``, handing ``gem_rebn`` the batch's loss mask."""
    from skyrl_train.trainer import RayPPOTrainer

    class GemRayPPOTrainer(RayPPOTrainer):
        def compute_advantages_and_returns(self, data: Any) -> Any:
            if self.cfg.trainer.algorithm.advantage_estimator != REBN_ESTIMATOR:
                return super().compute_advantages_and_returns(data)
            check_rebn_config(self.cfg)
            token = _LOSS_MASK.set(data["loss_mask"])
            try:
                return super().compute_advantages_and_returns(data)
            finally:
                _LOSS_MASK.reset(token)

    return GemRayPPOTrainer


@functools.cache
def gem_ppo_exp() -> type:
    """skyrl-train's ``BasePPOExp`` with :func:`gem_trainer_class`'s trainer and the gem env and
    estimator registered in the process that runs it (a Ray worker)."""
    from skyrl_train.entrypoints.main_base import BasePPOExp

    class GemPPOExp(BasePPOExp):
        def __init__(self, cfg: Any) -> None:
            register_env()
            register_estimator()
            check_rebn_config(cfg)
            super().__init__(cfg)

        def get_trainer(self, cfg, tracker, tokenizer, train_dataset, eval_dataset, inference_engine_client,
                        generator, colocate_pg):
            return gem_trainer_class()(cfg=cfg, tracker=tracker, tokenizer=tokenizer, train_dataset=train_dataset,
                                       eval_dataset=eval_dataset, inference_engine_client=inference_engine_client,
                                       generator=generator, colocate_pg=colocate_pg)

    return GemPPOExp


register_env()
register_estimator()

__all__ = ["ENV_CLASS", "REBN_ESTIMATOR", "GemSkyRLEnv", "check_rebn_config", "gem_ppo_exp", "gem_rows",
           "gem_trainer_class", "rebn_estimator", "register_env", "register_estimator"]
