"""GEM's env id grammar: ``suite:Name[-vN][-variant]``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gem.errors import InvalidEnvIdError

_ID = re.compile(
    r"^(?P<suite>[a-z][a-z0-9_]*):"
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9_.+]*(?:-(?!v\d+(?:-|$))[A-Za-z0-9_.+]+)*)"
    r"(?:-v(?P<version>\d+))?"
    r"(?:-(?P<variant>[A-Za-z0-9_.+-]+))?$"
)

# The tables below are the fallback for suites that are not installed (an id of one says what to
# install): an installed suite says what it provides through the gem_register_provides hook
# (gem.provides), and its word wins.

#: which distribution provides each suite prefix of the reference package
SUITE_PACKAGES = {
    "game": "gem-envs-games",
    "math": "gem-envs-math",
    "rg": "gem-envs-math[reasoning-gym]",
    "code": "gem-envs-code",
    "qa": "gem-envs-qa",
    "tool": "gem-tools",
    "logic": "gem-envs-qa",
    "webshop": "gem-envs-qa",
    "multi": "gem-envs-multi",
    "terminal": "gem-envs-terminal",
    "vf": "gem-integrations[verifiers]",
}

#: which distribution provides each ``gem`` subcommand that gem-core lacks (each suite's
#: plugin registers its own; this names them for installs that do not have that plugin)
COMMAND_PACKAGES = {
    "sandbox": "gem-tools",
    "search-server": "gem-tools",
    "qa-recall": "gem-envs-qa",
    "qa-corpus": "gem-envs-qa",
    "train": "gem-train",
    "serve": "gem-integrations",
    "eval": "gem-evals",
}

#: ``eval:`` ids are spread over suites; the reference's eval ids and where they live
EVAL_PACKAGES = {
    **dict.fromkeys(
        ["MATH500", "AMC", "AIME24", "AIME25", "OlympiadBench", "Minerva", "GSM8K", "MATH"],
        "gem-envs-math",
    ),
    **dict.fromkeys(["CodeContest", "HumanEval", "MBPP"], "gem-envs-code"),
    **dict.fromkeys(
        ["QaOpen", "TriviaQA", "PopQA", "2Wiki", "HotpotQA", "Bamboogle",
         "NaturalQuestions", "Musique", "FanOutQA"],
        "gem-envs-qa",
    ),
}


@dataclass(frozen=True)
class EnvId:
    """A parsed env id."""

    suite: str
    name: str
    version: int | None
    variant: str | None

    def __str__(self) -> str:
        text = f"{self.suite}:{self.name}"
        if self.version is not None:
            text += f"-v{self.version}"
        if self.variant:
            text += f"-{self.variant}"
        return text


def parse_env_id(env_id: str) -> EnvId:
    """Split an id into suite, name, version and variant.

    >>> parse_env_id("game:GuessTheNumber-v0-easy")
    EnvId(suite='game', name='GuessTheNumber', version=0, variant='easy')
    >>> parse_env_id("math:Math8K-3to5")
    EnvId(suite='math', name='Math8K-3to5', version=None, variant=None)
    """
    if not isinstance(env_id, str):
        raise InvalidEnvIdError(f"env id must be a string, got {type(env_id).__name__}")
    match = _ID.match(env_id)
    if not match:
        raise InvalidEnvIdError(
            f"{env_id!r} is not a valid env id: expected 'suite:Name', optionally "
            "followed by '-vN' and '-variant', e.g. 'game:GuessTheNumber-v0-easy' "
            "or 'math:GSM8K' (suite: lowercase letters, digits, '_')."
        )
    version = match["version"]
    return EnvId(match["suite"], match["name"], int(version) if version else None, match["variant"])


def package_for(env_id: str) -> str | None:
    """The distribution that provides ``env_id`` in a full install, if the fallback tables know
    (:meth:`gem.provides.ProvidesRegistry.package_for` asks the installed suites first)."""
    suite, _, name = env_id.partition(":")
    if suite == "eval":
        return EVAL_PACKAGES.get(name.split("-")[0])
    return SUITE_PACKAGES.get(suite)
