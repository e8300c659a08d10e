import itertools
import json

import pytest

from gem_evals.metrics import markdown_table, pass_at_k, pass_ks, summarize_env, wilson_interval
from gem_evals.records import EpisodeKey, EpisodeStore, needs_rerun


def test_wilson_interval_known_values():
    # reference values of the 95% Wilson score interval
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-5)
    assert wilson_interval(8, 10) == pytest.approx((0.49016, 0.94331), abs=1e-5)
    assert wilson_interval(50, 100) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_interval_contains_the_rate_and_shrinks_with_n():
    for n in (1, 5, 40, 1000):
        for c in range(0, n + 1, max(1, n // 7)):
            low, high = wilson_interval(c, n)
            assert 0.0 <= low <= c / n <= high <= 1.0
    assert wilson_interval(300, 1000)[1] - wilson_interval(300, 1000)[0] < wilson_interval(3, 10)[1] - \
        wilson_interval(3, 10)[0]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
def test_pass_at_k_is_the_exact_probability_over_subsets(n):
    # the estimator equals the fraction of k-subsets of the n samples that hold a success
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            exact = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(exact)
    assert pass_at_k(n, 1, 1) == pytest.approx(1 / n)


def test_pass_at_k_needs_enough_samples_and_ks_are_powers_of_two():
    with pytest.raises(ValueError, match="pass@3"):
        pass_at_k(2, 1, 3)
    assert pass_ks(1) == [1]
    assert pass_ks(4) == [1, 2, 4]
    assert pass_ks(5) == [1, 2, 4, 5]


def _record(episode, sample, success, error=None, ret=None, turns=2, tool_calls=0, tokens=10, retries=0):
    return {"env_id": "e", "episode": episode, "sample": sample, "success": success, "error": error,
            "return": float(success) if ret is None else ret, "turns": turns, "tool_calls": tool_calls,
            "tokens": {"total": tokens}, "retries": retries}


def test_summary_of_one_env_counts_errors_as_failures_and_reports_pass_at_k():
    records = [
        _record(0, 0, True, tool_calls=2), _record(0, 1, False, tokens=30),
        _record(1, 0, False, error="EndpointError: down", ret=0.0, turns=0, retries=5), _record(1, 1, False),
    ]
    row = summarize_env("e", records, samples=2)
    assert (row["episodes"], row["rollouts"], row["successes"]) == (2, 4, 1)
    assert row["success_rate"] == 0.25 and row["pass@1"] == 0.25
    # episode 0 has one success in two samples (pass@2 = 1), episode 1 none
    assert row["pass@2"] == 0.5
    assert row["ci95"] == pytest.approx(list(wilson_interval(1, 4)))
    assert row["errors"] == 1 and row["retries"] == 5
    assert row["mean_turns"] == 1.5 and row["mean_tool_calls"] == 0.5
    assert row["mean_tokens"] == 15 and row["total_tokens"] == 60
    table = markdown_table([row])
    assert table.splitlines()[0].startswith("| env | n | avg@2 | 95% CI | pass@2 |")
    assert "| e | 4 | 0.250 |" in table


def test_store_keeps_the_last_line_per_key_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "episodes.jsonl"
    store = EpisodeStore(path)
    first = {"env_id": "e", "episode": 0, "sample": 0, "error_kind": "endpoint", "success": False}
    store.append(first)
    store.append({**first, "error_kind": None, "success": True})
    store.append({"env_id": "e", "episode": 1, "sample": 0, "error_kind": None})
    store.close()
    with path.open("a") as f:
        f.write('{"env_id": "e", "episode": 2, "sam')  # a kill in the middle of a write
    records = EpisodeStore(path).load()
    assert set(records) == {EpisodeKey("e", 0, 0), EpisodeKey("e", 1, 0)}
    assert records[EpisodeKey("e", 0, 0)]["success"] is True
    assert not needs_rerun(records[EpisodeKey("e", 0, 0)]) and needs_rerun(first)
    # the torn line is gone from the file, so the next append starts on a line of its own
    assert path.read_text().endswith("}\n")
    assert all(json.loads(line) for line in path.read_text().splitlines())
    assert len(path.read_text().splitlines()) == 3
