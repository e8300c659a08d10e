"""gem-core's own plugin: registers its wrappers and CLI commands through the same
hooks as every other plugin."""

from __future__ import annotations

import functools

from gem.hookspecs import hookimpl
from gem.wrappers.episode import EncapsulateWrapper, EpisodeTrackingWrapper
from gem.wrappers.history import HistoryWrapper


@hookimpl
def gem_register_wrappers(registry):
    for mode in ("concat", "concat_with_action", "messages", "latest"):
        registry.register(mode, functools.partial(HistoryWrapper, mode=mode))
    for mode in ("concat_chat", "concat_chat_on_reset"):
        registry.register(mode, functools.partial(HistoryWrapper, mode=mode), requires_tokenizer=True)
    registry.register("episode_tracking", EpisodeTrackingWrapper)
    registry.register("answer_boxed", functools.partial(EncapsulateWrapper, prefix="\\boxed{", suffix="}"))
    registry.register("answer_tags", functools.partial(EncapsulateWrapper, prefix="<answer>", suffix="</answer>"))


@hookimpl
def gem_register_envs(registry):
    # ``vf:<taskset>``: a Prime Intellect verifiers environment, loaded by verifiers' own loader
    # (gem.integrations.verifiers, extra gem-core[verifiers]); nothing is imported until one is made
    registry.register_family("vf", "gem.integrations.verifiers:VerifiersEnv", "taskset")


@hookimpl
def gem_register_commands(cli):
    from gem.cli import commands

    commands.register_builtin(cli)
