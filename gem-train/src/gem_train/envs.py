"""The run's envs: a picklable factory per env id, and the check that every id of the config is registered.

A factory is a plain object, not a closure, so gem's runner can rebuild it in worker processes
(``rollout.processes``); it registers ``env.entry_point`` first where the id is unknown, as in a
fresh worker.

>>> from gem_train.config import TrainConfig
>>> make_env = env_factory(TrainConfig())
>>> make_env.env_id, make_env.wrappers
('game:GuessTheNumber-v0-easy', None)
"""

from __future__ import annotations

import gem
from gem.errors import GemError
from gem.factory import EnvFactory
from gem_train.config import ConfigError, TrainConfig

#: wrappers whose observation is text already rendered with the chat template
TEMPLATED_WRAPPERS = ("concat_chat", "concat_chat_on_reset")


def env_factory(cfg: TrainConfig, env_id: str | None = None) -> EnvFactory:
    """The bare env ``env_id`` (default: the training env); ``env.kwargs`` apply to the training env only."""
    env_id = env_id or cfg.env.id
    if env_id != cfg.env.id:
        return EnvFactory(env_id)
    return EnvFactory(env_id, dict(cfg.env.kwargs), entry_point=cfg.env.entry_point)



def templated(cfg: TrainConfig) -> bool:
    """Whether the wrappers render the chat template themselves (the policy must not apply it again)."""
    names = [w.strip() for w in cfg.env.wrappers.split(",")] if cfg.env.wrappers else []
    return any(w in TEMPLATED_WRAPPERS for w in names)


def check_env_ids(cfg: TrainConfig) -> None:
    """Raise :class:`ConfigError` (gem's "did you mean" on one line) unless every env id of the run is registered."""
    if cfg.env.entry_point and cfg.env.id not in gem.list_envs():
        gem.register(cfg.env.id, cfg.env.entry_point)
    for key, env_id in [("env.id", cfg.env.id), *(("env.eval_ids", i) for i in cfg.env.eval_ids)]:
        try:
            gem.spec(env_id)
        except GemError as exc:
            raise ConfigError(f"{key}: {' '.join(str(exc).splitlines())}") from None


__all__ = ["TEMPLATED_WRAPPERS", "EnvFactory", "check_env_ids", "env_factory", "templated"]
