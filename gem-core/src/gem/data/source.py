"""One dataset-source adapter that every dataset suite configures with a table.

A suite (math, QA, code) says where its packaged datasets sit and how a row of a file or
a hub dataset becomes one of its records; :class:`DatasetSource` does the rest the same way
for all of them: the ``source=`` grammar (:func:`gem.data.records.load_source`), the local
file and hub loaders with their per-process caches, and the message a hub-only dataset
raises (one ``source=`` form in every suite's message).

>>> def convert(rows, where, question_key="q", answer_key="a"):
...     return [{"q": r[question_key], "a": r[answer_key]} for r in rows]
>>> toy = DatasetSource("toy", {"one": (lambda: [{"q": "?", "a": "!"}], "one question")}, convert,
...                     keys={"question_key": "q", "answer_key": "a"}, enable="pip install datasets")
>>> toy.load("one")
<Records one (1)>
>>> print(toy.hub_hint("org/set", None).split("Either pass a local copy: ")[1].split(", or enable")[0])
gem.make(<id>, source='data.jsonl', question_key='q', answer_key='a') (.jsonl, .json or .parquet)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gem.data import records
from gem.data.records import Records

#: what a local file may be, said in every hint
FILE_KINDS = ".jsonl, .json or .parquet"


@dataclass(frozen=True)
class DatasetSource:
    """Where a suite's records come from.

    - ``suite``: its name in messages and cache keys (``"math"``);
    - ``packaged``: name -> (loader, what it holds), the datasets its wheels ship;
    - ``convert(rows, where, **keys)``: rows of a file or hub dataset -> records;
    - ``keys``: the row keys ``convert`` reads and their defaults (``question_key``, ...);
      a call may override any of them;
    - ``row_note``: what a row holds, added to the hint; ``enable``: what to install for the
      hub; ``offline``: hub name -> the closest packaged data (or one text for every name).
    """

    suite: str
    packaged: Mapping[str, tuple[Callable[[], Iterable[Any]], str]]
    convert: Callable[..., Any]
    keys: Mapping[str, Any] = field(default_factory=dict)
    row_note: str = ""
    enable: str = "pip install datasets"
    offline: Mapping[str, str] | str = field(default_factory=dict)

    def _keys(self, given: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(given) - set(self.keys)
        if unknown:
            raise TypeError(f"unknown key argument(s) {sorted(unknown)} for {self.suite} data; "
                            f"known: {', '.join(self.keys)}")
        return {**self.keys, **given}

    def _convert(self, keys: Mapping[str, Any]) -> Callable[[Any, str], Any]:
        return functools.partial(self.convert, **keys)

    def load_packaged(self, name: str) -> Records:
        """A packaged dataset by name (an unknown name lists the known ones)."""
        return records.load_packaged(self.suite, self.packaged, name)

    def load_local(self, path: str | os.PathLike[str], **keys: Any) -> Records:
        """A local ``.jsonl``/``.json`` (optionally ``.gz``) or ``.parquet`` file of records."""
        keys = self._keys(keys)
        return records.load_local(path, self._convert(keys), key=(self.suite, *keys.values()))

    def hub_hint(self, dataset_name: str, split: str | None, **keys: Any) -> str:
        """The message of the error a hub-only dataset raises: how to supply it."""
        keys = self._keys(keys)
        shown = "".join(f", {k}={v!r}" for k, v in keys.items() if k.endswith("_key"))
        note = f"; {self.row_note}" if self.row_note else ""
        offline = self.offline if isinstance(self.offline, str) else self.offline.get(dataset_name)
        return records.hub_hint(dataset_name, split,
                                local_copy=f"gem.make(<id>, source='data.jsonl'{shown}) ({FILE_KINDS}{note})",
                                enable=self.enable, offline=offline)

    def load_hub(self, dataset_name: str, split: str | None = None, **keys: Any) -> Records:
        """A dataset from the Hugging Face hub (or its local cache), through ``datasets``."""
        keys = self._keys(keys)
        return records.load_hub(dataset_name, split, self._convert(keys), self.hub_hint(dataset_name, split, **keys),
                                key=(self.suite, *keys.values()))

    def load(self, source: str | os.PathLike[str] | None = None, dataset_name: str | None = None,
             split: str | None = None, **keys: Any) -> Records:
        """Records from ``source`` (a packaged name, a local file, ``"hub:<name>"``, or ``"hub"``
        with ``dataset_name``; :func:`gem.data.records.load_source`), or with no ``source`` the hub
        dataset ``dataset_name``."""
        keys = self._keys(keys)
        if source is None:
            if dataset_name:
                return self.load_hub(dataset_name, split, **keys)
            raise ValueError(f"a {self.suite} env needs source= (a packaged dataset: {', '.join(self.packaged)}; a "
                             f"local {FILE_KINDS} file; or hub:<name>), dataset_name= or dataset=")
        return records.load_source(source, self.packaged, self.load_packaged,
                                   lambda path: self.load_local(path, **keys),
                                   lambda name, split: self.load_hub(name, split, **keys),
                                   dataset_name, split)


__all__ = ["FILE_KINDS", "DatasetSource"]
