"""DatasetEnv: evaluation order, shuffled epochs, state and spawn, and the GEM contract."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gem.data import DatasetEnv, Records, cached
from gem.testing import check_env


class Arithmetic(DatasetEnv):
    """One question per episode; the answer is checked exactly."""

    def __init__(self, size: int = 20, shuffle: bool = True, seed: int | None = None) -> None:
        records = cached(("test", "arithmetic", size), lambda: Records("sums", [(i, i + 1) for i in range(size)]))
        super().__init__(records, shuffle=shuffle, seed=seed)

    def pose(self, record: Any) -> str:
        return f"What is {record[0]} + 1?"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "", float(action.strip() == str(self.record[1])), True, False, {"idx": self.index}

    def sample_random_action(self) -> str:
        return str(self.rng.randint(0, 25))


def test_the_gem_contract_holds() -> None:
    check_env(Arithmetic())
    check_env(Arithmetic(shuffle=False))


def test_idx_poses_that_record() -> None:
    env = Arithmetic()
    assert [env.reset(idx=i)[1] for i in (0, 5, 19)] == [{"idx": i, "epoch": 0} for i in (0, 5, 19)]
    assert env.reset(idx=7)[0] == "What is 7 + 1?" and env.step("8")[1] == 1.0
    with pytest.raises(IndexError, match=r"idx=20 is outside the dataset \(0..19\)"):
        env.reset(idx=20)


def test_epochs_are_shuffled_permutations_drawn_from_the_env_rng() -> None:
    env = Arithmetic()
    first = [env.reset(seed=3)[1]["idx"]] + [env.reset()[1]["idx"] for _ in range(19)]
    second = [env.reset()[1] for _ in range(20)]
    assert sorted(first) == list(range(20)) and first != sorted(first)
    assert sorted(i["idx"] for i in second) == list(range(20)) and [i["idx"] for i in second] != first
    assert {i["epoch"] for i in second} == {1}
    replay = Arithmetic()
    assert [replay.reset(seed=3)[1]["idx"]] + [replay.reset()[1]["idx"] for _ in range(19)] == first
    assert [Arithmetic(seed=3).reset()[1]["idx"] for _ in range(2)] == [first[0]] * 2  # constructor seed


def test_without_shuffle_the_order_is_the_dataset_order() -> None:
    env = Arithmetic(size=3, shuffle=False)
    assert [env.reset(seed=s)[1]["idx"] for s in (1, 2)] == [0, 0]
    assert [env.reset()[1] for _ in range(3)] == [{"idx": 1, "epoch": 0}, {"idx": 2, "epoch": 0},
                                                  {"idx": 0, "epoch": 1}]  # fmt: skip


def test_state_round_trips_through_json_and_spawn_shares_the_records() -> None:
    env = Arithmetic()
    env.reset(seed=1)
    for _ in range(25):  # into the second epoch
        env.reset()
    state = json.loads(json.dumps(env.get_state()))
    expected = [env.reset()[1] for _ in range(30)]
    env.set_state(state)
    assert [env.reset()[1] for _ in range(30)] == expected
    env.set_state(state)
    twin, clone = env.spawn(), env.spawn(same_state=True)
    assert twin.records is env.records and Arithmetic().records is env.records  # one copy of the data
    assert [clone.reset()[1] for _ in range(30)] == expected
    with pytest.raises(ValueError, match="dataset of 20 records, this env has 5"):
        Arithmetic(size=5).set_state(state)


def test_step_before_reset_and_empty_datasets_are_errors() -> None:
    with pytest.raises(RuntimeError, match="call reset"):
        Arithmetic().step("1")
    with pytest.raises(ValueError, match="Arithmetic got an empty dataset"):
        Arithmetic(size=0)
