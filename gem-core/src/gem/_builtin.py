"""gem-core's own plugin: registers its wrappers and CLI commands through the same
hooks as every other plugin (and, as part of it, the rows of the reference paths: :mod:`gem.compat`
adds its hook and gem-core's implementation through :func:`gem.extend.add_catalog_hook`)."""

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


#: gem-core's own subcommands: name -> (function in gem.cli.commands, help); imported when run
COMMANDS = {
    "list": ("cmd_list", "list registered env ids (optionally matching a pattern)"),
    "info": ("cmd_info", "show an env's spec, defaults and first observation"),
    "plugins": ("cmd_plugins", "show installed plugins and whether they loaded"),
    "play": ("cmd_play", "play an env in the terminal"),
    "data": ("cmd_data", "download the offline datasets the installed suites read, or show where"),
    "replay": ("cmd_replay", "step recorded episodes again and check they reproduce their rewards"),
    "audit": ("cmd_audit", "play generic reward-hack strategies against envs; exit 1 when one beats the baseline"),
}


@hookimpl
def gem_register_commands(cli):
    for name, (function, text) in COMMANDS.items():
        cli.register(name, f"gem.cli.commands:{function}", help=text)
