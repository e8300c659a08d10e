"""Which distribution provides which env-id prefix, ``eval:`` id, ``gem`` command or reference module path.

An installed suite says so itself, through the ``gem_register_provides`` hook, with the extra a name
needs where it needs one::

    @gem.hookimpl
    def gem_register_provides(registry):
        registry.suite("math")
        registry.suite("rg", extra="reasoning-gym")       # rg: ids need gem-envs-math[reasoning-gym]
        registry.evals(["MATH500", "GSM8K"])               # eval:MATH500, eval:GSM8K
        registry.command("qa-recall")
        registry.reference_path("gem.envs.math_env")      # the reference module paths below it

The distribution is the one whose plugin registers the name. The kernel's messages (an unknown id, an
unknown command, a reference path that does not import) read these first, and the fallback tables
(:data:`gem.ids.SUITE_PACKAGES`, :data:`gem.ids.EVAL_PACKAGES`, :data:`gem.ids.COMMAND_PACKAGES`,
``gem.compat.table.PROVIDERS``) only for what no installed suite answers: a suite that is not
installed has no hook to ask, and still gets "install gem-envs-math".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gem import ids
from gem.errors import RegistrationError
from gem.registry import _Sourced

#: what a distribution can provide: the kind -> what its keys are
KINDS = {
    "suite": "env-id prefix",
    "eval": "eval: id name",
    "command": "gem command",
    "reference_path": "reference module path",
}


class ProvidesRegistry(_Sourced):
    """What each installed distribution provides; plugins receive it in ``gem_register_provides``."""

    kind = "provided name"

    def __init__(self) -> None:
        super().__init__()
        self._by_kind: dict[str, dict[str, tuple[str, str | None]]] = {kind: {} for kind in KINDS}

    def _add(self, kind: str, key: str, extra: str | None) -> None:
        if not isinstance(key, str) or not key:
            raise RegistrationError(f"{KINDS[kind]} {key!r}: must be a non-empty string")
        if extra is not None and (not isinstance(extra, str) or not extra.replace("-", "").isalnum()):
            raise RegistrationError(f"{KINDS[kind]} {key!r}: extra must be an extra's name, got {extra!r}")
        old = self._by_kind[kind].get(key)
        if old is not None and old[0] != self.source:
            raise RegistrationError(f"{KINDS[kind]} {key!r} is provided by both {old[0]!r} and {self.source!r}")
        if old != (self.source, extra):  # eval:MATH-L1 .. -L5 all say MATH: `gem plugins` counts it once
            self._note()
        self._by_kind[kind][key] = (self.source, extra)

    def suite(self, prefix: str, extra: str | None = None) -> None:
        """Ids ``prefix:...`` come from this distribution (with ``extra`` installed, if given)."""
        ids.parse_env_id(f"{prefix}:x")
        self._add("suite", prefix, extra)

    def evals(self, names: Iterable[str], extra: str | None = None) -> None:
        """``eval:NAME`` ids (and their variants ``eval:NAME-...``: a name counts up to its first ``-``)
        come from this distribution."""
        for name in [names] if isinstance(names, str) else names:
            self._add("eval", name.split("-")[0], extra)

    def command(self, name: str, extra: str | None = None) -> None:
        """``gem NAME`` comes from this distribution (say so even when its plugin registers it: a command
        whose extra is missing is then still named)."""
        self._add("command", name, extra)

    def reference_path(self, prefix: str, extra: str | None = None) -> None:
        """The reference package's module paths at and below ``prefix`` come from this distribution."""
        if not prefix.startswith("gem."):
            raise RegistrationError(f"reference module path {prefix!r}: must be a module path below 'gem.'")
        self._add("reference_path", prefix, extra)

    def provider(self, kind: str, key: str) -> str | None:
        """``"distribution"`` or ``"distribution[extra]"`` that an installed suite named for ``key``."""
        found = self._by_kind[kind].get(key)
        if found is None:
            return None
        source, extra = found
        return f"{source}[{extra}]" if extra else source

    def items(self, kind: str) -> dict[str, str]:
        """Every key of ``kind`` an installed suite named -> its provider."""
        return {key: self.provider(kind, key) or "" for key in self._by_kind[kind]}

    def names(self) -> list[str]:
        return sorted(f"{kind}:{key}" for kind, keys in self._by_kind.items() for key in keys)

    # -- the answers the kernel's messages use: the hook's first, then the fallback tables -----------
    def package_for(self, env_id: str) -> str | None:
        """The distribution that provides ``env_id``: an installed suite's word, else the fallback table."""
        suite, _, name = env_id.partition(":")
        if suite == "eval":
            return self.provider("eval", name.split("-")[0]) or ids.package_for(env_id)
        return self.provider("suite", suite) or ids.package_for(env_id)

    def command_package(self, name: str) -> str | None:
        """The distribution that provides ``gem NAME``."""
        return self.provider("command", name) or ids.COMMAND_PACKAGES.get(name)

    def commands(self) -> list[str]:
        """Every command some distribution provides (installed or in the fallback table)."""
        return sorted({*self._by_kind["command"], *ids.COMMAND_PACKAGES})

    def path_provider(self, path: str, fallback: Mapping[str, str] | None = None) -> str | None:
        """The distribution that provides reference module ``path`` (a path at or below a prefix it named, or a
        package above one): an installed suite's word, else ``fallback`` (prefix -> distribution)."""
        for table in (self.items("reference_path"), fallback or {}):
            below = [prefix for prefix in table if path == prefix or path.startswith(prefix + ".")]
            if below:
                return table[max(below, key=len)]
            above = next((prefix for prefix in table if prefix.startswith(path + ".")), None)
            if above is not None:
                return table[above]
        return None


def undeclared(catalog: Any, distribution: str) -> list[str]:
    """What ``distribution``'s plugin registers in ``catalog`` (a :class:`gem.plugins.Catalog`) but does not say
    it provides: env-id prefixes and ``eval:`` names, commands, reference module paths (``kind:name``). A
    suite's tests assert it is empty, so that what it says stays what it holds."""
    provides: ProvidesRegistry = catalog.provides
    mine = {kind: {k for k, v in provides.items(kind).items() if v.partition("[")[0] == distribution}
            for kind in KINDS}
    missing = set()
    env_ids = [i for i in catalog.envs.ids() if catalog.envs.get(i).source == distribution]
    env_ids += [f"{suite}:*" for suite, spec in catalog.envs._families.items() if spec.source == distribution]
    for env_id in env_ids:
        suite, _, name = env_id.partition(":")
        if suite == "eval" and name.split("-")[0] not in mine["eval"]:
            missing.add(f"eval:{name.split('-')[0]}")
        elif suite != "eval" and suite not in mine["suite"]:
            missing.add(f"suite:{suite}")
    missing |= {f"command:{name}" for name in catalog.commands.names()
                if catalog.commands.get(name).source == distribution and name not in mine["command"]}
    compat = catalog.extensions.get("compat")
    for path in compat.names() if compat is not None else []:
        covered = any(path == p or path.startswith(p + ".") for p in mine["reference_path"])
        if compat.source_of(path) == distribution and not covered:
            missing.add(f"reference_path:{path}")
    return sorted(missing)
