"""Records: immutable, cached per process and shared; local files with configurable keys; the hub."""

from __future__ import annotations

import gzip
import json
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gem.data import Records, cached, hub_hint, load_hub, load_local, load_source, read_rows, require_keys
from gem.errors import DataUnavailableError

ROWS = [{"q": "1+1?", "a": 2, "id": "x"}, {"q": "2+2?", "a": "4", "id": "y"}]


def to_qa(rows: Iterable[Mapping[str, Any]], where: str, question_key: str = "q", answer_key: str = "a") -> list[dict]:
    records = []
    for i, row in enumerate(rows):
        require_keys(row, i, where, question_key=question_key, answer_key=answer_key)
        records.append({"question": row[question_key], "answer": str(row[answer_key])})
    return records


def test_records_are_an_immutable_named_sequence() -> None:
    records = Records("toy", (r for r in ROWS))
    assert (len(records), records[1]["id"], [r["id"] for r in records[:2]]) == (2, "y", ["x", "y"])
    assert list(records) == ROWS and repr(records) == "<Records toy (2)>"
    with pytest.raises(TypeError):
        records[0] = {}  # type: ignore[index]


@pytest.mark.parametrize("name", ["d.jsonl", "d.json", "d.json.gz", "d.jsonl.gz", "wrapped.json"])
def test_local_json_files(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    text = "\n".join(json.dumps(r) for r in ROWS) if ".jsonl" in name else json.dumps(ROWS)
    if name == "wrapped.json":  # {"train": [...]}: the one list inside counts
        text = json.dumps({"train": ROWS, "version": 1})
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    assert read_rows(path) == ROWS
    records = load_local(path, to_qa, key=("test", "q", "a"))
    assert [(r["question"], r["answer"]) for r in records] == [("1+1?", "2"), ("2+2?", "4")]
    assert records.name == name


def test_a_json_object_with_several_lists_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"train": ROWS, "test": ROWS}))
    with pytest.raises(DataUnavailableError, match="one list"):
        read_rows(path)


def test_parquet_reads_with_pyarrow_or_says_how_to_get_it(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # gem-core does not depend on pyarrow: the message says what to install
        path.write_bytes(b"PAR1")
        with pytest.raises(DataUnavailableError, match="pip install pyarrow"):
            read_rows(path)
        return
    pq.write_table(pa.Table.from_pylist([{**r, "a": str(r["a"])} for r in ROWS]), path)
    assert [r["answer"] for r in load_local(path, to_qa, key=("test", "q", "a"))] == ["2", "4"]


def test_parquet_without_pyarrow_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    (tmp_path / "d.parquet").write_bytes(b"PAR1")
    with pytest.raises(DataUnavailableError, match=r"d\.parquet needs pyarrow: pip install pyarrow"):
        read_rows(tmp_path / "d.parquet")


def test_missing_keys_name_the_arguments_that_choose_them(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS))
    convert = lambda rows, where: to_qa(rows, where, "problem", "answer")  # noqa: E731
    with pytest.raises(DataUnavailableError) as caught:
        load_local(path, convert, key=("test", "problem", "answer"))
    assert str(caught.value) == (
        f"{path}: record 0 has no 'problem'/'answer' (its keys: q, a, id); pass question_key= and answer_key="
    )
    with pytest.raises(DataUnavailableError, match="no such data file"):
        load_local(tmp_path / "missing.jsonl", to_qa, key=("test",))


def test_loads_are_cached_by_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS))
    first = load_local(path, to_qa, key=("test", "q", "a"))
    assert load_local(str(path), to_qa, key=("test", "q", "a")) is first
    assert load_local(path, to_qa, key=("test", "other")) is not first  # another conversion
    path.write_text(json.dumps(ROWS[0]))  # the file changed: loaded anew
    assert len(load_local(path, to_qa, key=("test", "q", "a"))) == 1


def test_cached_builds_once_for_concurrent_callers() -> None:
    builds: list[int] = []
    start = threading.Barrier(8)

    def build() -> Records:
        builds.append(1)
        return Records("shared", ROWS)

    results: list[Records] = []

    def worker() -> None:
        start.wait()
        results.append(cached(("test", "concurrent", id(builds)), build))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and all(r is results[0] for r in results)


def test_hub_without_datasets_says_how_to_supply_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # as on machines without it
    hint = hub_hint("org/set", "test", local_copy="gem.make(<id>, path='d.jsonl')", enable="pip install datasets",
                    offline="eval:Toy")  # fmt: skip
    assert hint.startswith("This env needs the Hugging Face dataset 'org/set' (split 'test')")
    assert "path='d.jsonl'" in hint and "pip install datasets" in hint and hint.endswith("is eval:Toy.")
    with pytest.raises(DataUnavailableError) as caught:
        load_hub("org/set", "test", to_qa, hint, key=("test",))
    assert str(caught.value) == hint + " (`datasets` is not installed)"


def test_one_source_grammar_names_packaged_local_and_hub_data(tmp_path: Path) -> None:
    seen: list[tuple] = []
    packaged = {"toy": "one packaged set", "set.v2": "a name with a dot"}

    def read(source: str, dataset_name: str | None = None, split: str | None = None) -> Any:
        return load_source(
            source, packaged,
            lambda name: seen.append(("packaged", name)),
            lambda path: seen.append(("local", path)),
            lambda name, split: seen.append(("hub", name, split)),
            dataset_name, split,
        )  # fmt: skip

    path = tmp_path / "rows"
    path.write_text(json.dumps(ROWS[0]))
    for source in ("toy", "set.v2", "hub:owner/set", "data.jsonl", "dir/rows", str(path)):
        read(source, split="test")
    read("hub", dataset_name="owner/other")
    assert seen == [
        ("packaged", "toy"), ("packaged", "set.v2"), ("hub", "owner/set", "test"),
        ("local", "data.jsonl"), ("local", "dir/rows"), ("local", str(path)), ("hub", "owner/other", None),
    ]  # fmt: skip
    with pytest.raises(DataUnavailableError, match=r"'hub' needs dataset_name="):
        read("hub")
    with pytest.raises(DataUnavailableError, match=r"names no dataset"):
        read("hub:")
    with pytest.raises(DataUnavailableError, match=r"neither a packaged dataset \(toy, set.v2\) nor a data file"):
        read("tyo")


def test_a_local_source_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS))
    records = load_source(str(path), {}, print, lambda p: load_local(p, to_qa, key=("t",)), print)
    assert [r["question"] for r in records] == ["1+1?", "2+2?"]
