"""MATH-500's own solutions, graded as if a model wrote them, must score; solutions
graded against another problem's answer must not."""

from __future__ import annotations

import random

import pytest

from gem_envs_math import sources
from gem_envs_math.grading import grade
from gem_envs_math.pool import shared_pool

SAMPLE = 100


@pytest.fixture(scope="module")
def sample() -> list[dict]:
    problems = sources.load_packaged("math500")
    return [problems[i] for i in sorted(random.Random(0).sample(range(len(problems)), SAMPLE))]


def test_solutions_agree_with_their_reference_answers(sample: list[dict], record_property) -> None:
    pool = shared_pool()
    end_to_end = sum(grade(r["solution"], r["answer"]).correct for r in sample) / SAMPLE
    # without the exact-string shortcut: does each reference parse and verify as itself?
    parsed = sum(
        pool.call("gem_envs_math.verify:sympy_equivalent", r["answer"], r["answer"]).value is True for r in sample
    ) / SAMPLE
    record_property("math500_agreement", end_to_end)
    record_property("math500_parse_agreement", parsed)
    print(f"MATH-500 agreement on {SAMPLE} problems: end to end {end_to_end:.1%}, through sympy {parsed:.1%}")
    assert end_to_end >= 0.98 and parsed >= 0.95


def test_solutions_do_not_match_other_answers(sample: list[dict]) -> None:
    pool = shared_pool()
    false_matches = []
    for this, other in zip(sample, sample[1:] + sample[:1]):
        verdict = pool.call("gem_envs_math.verify:sympy_equivalent", this["answer"], other["answer"])
        if verdict.value is True and this["answer"].replace("x=", "") != other["answer"].replace("x=", ""):
            false_matches.append((this["answer"], other["answer"]))
    assert false_matches == []
