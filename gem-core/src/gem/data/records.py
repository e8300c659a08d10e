"""Datasets in memory: an immutable sequence of records, loaded once per process.

A dataset env's records come from packaged data (:mod:`gem.data.packaged`), a local
``.jsonl``/``.json``/``.parquet`` file, or the Hugging Face hub. Whatever the source, the
loaded :class:`Records` are cached per process under a key, so every env built on the
same data, spawned siblings included, shares one copy. Each suite turns raw rows into its
own record format (``convert``); this module only reads, checks keys and caches, and
says what a ``source=`` string names (:func:`load_source`).

>>> import json, pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "qa.jsonl"
>>> _ = path.write_text(json.dumps({"q": "2+2?", "a": 4}))
>>> to_qa = lambda rows, where: [{"question": r["q"], "answer": r["a"]} for r in rows]
>>> records = load_local(path, to_qa, key=("doc", "q", "a"))
>>> records[0], load_local(path, to_qa, key=("doc", "q", "a")) is records
({'question': '2+2?', 'answer': 4}, True)
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar, overload

from gem.errors import DataUnavailableError

T = TypeVar("T")

#: turns raw rows (and a label for messages) into a suite's records
Convert = Callable[[Iterable[Mapping[str, Any]], str], Iterable[Any]]


class Records(Sequence):
    """An immutable, named sequence of records (dicts, or a suite's own record type).

    >>> records = Records("toy", [{"question": "q", "answer": "a"}])
    >>> len(records), records[0]["answer"], records
    (1, 'a', <Records toy (1)>)
    """

    def __init__(self, name: str, records: Iterable[Any]) -> None:
        self.name = name
        self._records = tuple(records)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    @overload
    def __getitem__(self, index: str) -> list[Any]: ...
    def __getitem__(self, index):
        if isinstance(index, str):  # a column, as ``datasets.Dataset["question"]`` gives
            return [record[index] for record in self._records]
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._records)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({len(self)})>"

    # the two ``datasets.Dataset`` methods scripts use to subsample an env's data
    def select(self, indices: Iterable[int]) -> Records:
        """The records at ``indices``, in that order."""
        return Records(self.name, [self._records[i] for i in indices])

    def shuffle(self, seed: int | None = None) -> Records:
        """The records in a random order (``seed`` makes it reproducible)."""
        order = list(self._records)
        random.Random(seed).shuffle(order)
        return Records(self.name, order)


_cache: dict[Hashable, Any] = {}
_cache_lock = threading.RLock()  # re-entrant: one dataset may be built from another


def cached(key: Hashable, build: Callable[[], T]) -> T:
    """``build()``'s result, built once per process for ``key`` and shared afterwards.

    Keys are tuples whose first item names the suite or the kind of source, e.g.
    ``("math", "packaged", "math500")``. A key may hold a :class:`Records` (identity
    hash): the cache then keeps that object alive, so its identity is never reused.

    >>> cached(("doc", 1), lambda: Records("built once", []))
    <Records built once (0)>
    >>> cached(("doc", 1), lambda: Records("not built", []))
    <Records built once (0)>
    """
    # the lock is held while building so that envs made concurrently load once
    with _cache_lock:
        if key not in _cache:
            _cache[key] = build()
        return _cache[key]


def require_keys(row: Mapping[str, Any], index: int, where: str, **keys: str) -> None:
    """Raise :class:`DataUnavailableError` unless ``row`` has every key in ``keys``
    (argument name -> key, e.g. ``question_key="q"``); the message names the arguments
    that choose other keys.

    >>> require_keys({"q": "?", "a": "!"}, 0, "data.jsonl", question_key="q", answer_key="a")
    """
    absent = [key for key in keys.values() if key not in row]
    if absent:
        wanted = "/".join(repr(key) for key in keys.values())
        arguments = " and ".join(f"{name}=" for name in keys)
        raise DataUnavailableError(
            f"{where}: record {index} has no {wanted} (its keys: {', '.join(map(str, row))}); pass {arguments}"
        )


def parse_rows(raw: bytes, name: str) -> list[Mapping[str, Any]]:
    """The rows in ``raw``, the bytes of a file called ``name``: ``.jsonl`` or ``.json``
    (either optionally ``.gz``) or ``.parquet`` (needs ``pyarrow``). A JSON object holding
    exactly one list (``{"train": [...]}``) counts as that list.

    >>> parse_rows(b'{"q": 1}\\n{"q": 2}\\n', "rows.jsonl")
    [{'q': 1}, {'q': 2}]
    """
    suffixes = PurePosixPath(name).suffixes
    if ".parquet" in suffixes:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataUnavailableError(f"reading {name} needs pyarrow: pip install pyarrow") from None
        return pq.read_table(io.BytesIO(raw)).to_pylist()
    if suffixes[-1:] == [".gz"]:
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")
    if ".jsonl" in suffixes:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, Mapping):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DataUnavailableError(f"{name}: expected a JSON list of records or an object holding one list")
        data = lists[0]
    if not isinstance(data, list):
        raise DataUnavailableError(f"{name}: expected a JSON list of records, got {type(data).__name__}")
    return data


def read_rows(path: str | os.PathLike[str]) -> list[Mapping[str, Any]]:
    """The rows of a local file (see :func:`parse_rows` for the formats)."""
    return parse_rows(Path(path).read_bytes(), str(path))


def load_packaged(suite: str, packaged: Mapping[str, tuple[Callable[[], Iterable[Any]], str]], name: str) -> Records:
    """Dataset ``name`` of a suite's table of packaged datasets (name -> (loader, what it
    holds)), loaded once per process; an unknown name lists the known ones.

    >>> table = {"toy": (lambda: [{"q": "?"}], "one question")}
    >>> load_packaged("doc", table, "toy")
    <Records toy (1)>
    """
    if name not in packaged:
        raise DataUnavailableError(f"no packaged {suite} dataset {name!r}; known: {', '.join(packaged)}")
    loader, _ = packaged[name]
    return cached((suite, "packaged", name), lambda: Records(name, loader()))


def load_local(path: str | os.PathLike[str], convert: Convert, key: tuple) -> Records:
    """The records of a local file (see :func:`read_rows`), converted by ``convert(rows, where)``.

    Cached per process by the file's path, modification time and size, and ``key``: a
    tuple naming the suite and whatever else ``convert`` depends on (the keys it reads),
    e.g. ``("math", question_key, answer_key)``.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataUnavailableError(f"no such data file: {file}")
    stat = file.stat()
    full_key = ("local", str(file.resolve()), stat.st_mtime_ns, stat.st_size, *key)
    return cached(full_key, lambda: Records(file.name, convert(read_rows(file), str(file))))


def hub_hint(dataset_name: str, split: str | None, local_copy: str, enable: str, offline: str | None = None) -> str:
    """The message of the error a hub-only dataset raises: how to supply it.

    ``local_copy`` shows the call with a local file, ``enable`` what to install for the
    hub, ``offline`` the closest data that works offline.
    """
    split_text = f" (split {split!r})" if split else ""
    return (
        f"This env needs the Hugging Face dataset {dataset_name!r}{split_text}, which is not available here. "
        f"Either pass a local copy: {local_copy}, or enable the hub: {enable} and set HF_HUB_OFFLINE=0 "
        "(the hub is off unless you ask for it; HF_HUB_OFFLINE=1 reads only the local HF cache)."
        + (f" Offline, the closest packaged data is {offline}." if offline else "")
    )


_FALSE = {"0", "false", "no", "off"}


def hub_enabled() -> bool:
    """Whether the user asked for the Hugging Face hub: ``HF_HUB_OFFLINE`` set to 0/false/no/off.

    Unset means off: nothing in GEM waits on the hub (or on retries against an unreachable
    one) unless asked to. Data already in the local HF cache is still read, offline."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _FALSE


def _import_datasets(hint: str) -> Any:
    """``datasets``, set up to read only the local cache unless :func:`hub_enabled`."""
    if not hub_enabled() and "datasets" not in sys.modules:
        # huggingface_hub and datasets read this once, at import; it holds for the process
        # (a later from_pretrained of a hub name is offline too, as nothing asked for the hub)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise DataUnavailableError(hint + " (`datasets` is not installed)") from None
    if not hub_enabled() and not getattr(datasets.config, "HF_HUB_OFFLINE", False):
        # imported online before we could ask for the cache only: don't let it reach the hub
        raise DataUnavailableError(hint + " (`datasets` was imported with the hub on, but HF_HUB_OFFLINE=0 "
                                   "is not set: set it to use the hub, or HF_HUB_OFFLINE=1 for the cache)")
    return datasets


def load_hub(dataset_name: str, split: str | None, convert: Convert, hint: str, key: tuple) -> Records:
    """A Hugging Face dataset (from the hub or its local cache, through ``datasets``),
    converted by ``convert(rows, where)``; cached per process by name, split and ``key``
    (as for :func:`load_local`). Anything that keeps it
    from loading raises :class:`DataUnavailableError` with ``hint`` (see :func:`hub_hint`).
    Only the local HF cache is read unless :func:`hub_enabled`."""
    datasets = _import_datasets(hint)

    def build() -> Records:
        try:
            loaded = datasets.load_dataset(dataset_name, split=split)
        except Exception as exc:  # offline, missing, gated: all mean "not available"
            raise DataUnavailableError(f"{hint} ({type(exc).__name__}: {exc})") from exc
        if isinstance(loaded, datasets.DatasetDict):
            if len(loaded) != 1:
                raise DataUnavailableError(f"{dataset_name} has splits {list(loaded)}: pass split=")
            loaded = next(iter(loaded.values()))
        where = f"{dataset_name}:{split}" if split else dataset_name
        return Records(where, convert(loaded, where))

    return cached(("hub", dataset_name, split, *key), build)


#: the ``source=`` prefix (or, alone with ``dataset_name=``, the value) that names a hub dataset
HUB = "hub"


def load_source(
    source: str | os.PathLike[str],
    packaged: Mapping[str, Any],
    load_packaged: Callable[[str], Records],
    load_local: Callable[[str], Records],
    load_hub: Callable[[str, str | None], Records],
    dataset_name: str | None = None,
    split: str | None = None,
) -> Records:
    """The records a dataset env's ``source=`` names; every suite reads it this way:

    - a packaged dataset: a name in ``packaged`` (``"math500"``, ``"humaneval"``, ...);
    - a Hugging Face dataset: ``"hub:<name>"``, or ``"hub"`` with ``dataset_name=``, and
      ``split``; only the local HF cache is read unless :func:`hub_enabled`;
    - a local ``.jsonl``/``.json``/``.parquet`` file: a path (one with a directory or a
      suffix, or an existing file).

    How each kind is loaded stays the suite's (``load_packaged(name)``,
    ``load_local(path)``, ``load_hub(name, split)``); anything else is an error that lists
    the packaged names.

    >>> table = {"toy": [{"q": "?"}]}
    >>> load_source("toy", table, lambda name: Records(name, table[name]), print, print)
    <Records toy (1)>
    >>> load_source("hub:owner/set", table, print, print, lambda name, split: (name, split), split="test")
    ('owner/set', 'test')
    """
    text = os.fspath(source)
    if text in packaged:
        return load_packaged(text)
    if text == HUB:
        if not dataset_name:
            raise DataUnavailableError(f"source={HUB!r} needs dataset_name= (or pass source='{HUB}:<name>')")
        return load_hub(dataset_name, split)
    if text.startswith(HUB + ":"):
        name = text[len(HUB) + 1 :].strip()
        if not name:
            raise DataUnavailableError(f"source={text!r} names no dataset: write source='{HUB}:<owner>/<name>'")
        return load_hub(name, split)
    path = Path(text).expanduser()
    if path.suffix or os.sep in text or "/" in text or path.is_file():
        return load_local(text)
    raise DataUnavailableError(
        f"source={text!r} is neither a packaged dataset ({', '.join(packaged) or 'none'}) nor a data file "
        f"(.jsonl, .json or .parquet) nor '{HUB}:<name>'"
    )
