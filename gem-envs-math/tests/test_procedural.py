"""Generated problems: exact answers, seeded, every topic and difficulty."""

from __future__ import annotations

import random

import pytest
import sympy
from sympy.parsing.sympy_parser import (
    implicit_multiplication_application,
    parse_expr,
    standard_transformations,
)

import gem
from gem.testing import check_env
from gem_envs_math.plugin import PROCEDURAL
from gem_envs_math.procedural import DIFFICULTIES, TOPICS, ProceduralMathEnv
from gem_envs_math.verify import is_equivalent


@pytest.mark.parametrize("generator", [g for gens in TOPICS.values() for g in gens], ids=lambda g: g.__name__)
@pytest.mark.parametrize("level", sorted(DIFFICULTIES.values()))
def test_generators_give_gradable_answers(generator, level: int) -> None:
    rng = random.Random(level)
    for _ in range(5):
        question, answer = generator(rng, level)
        assert question.strip() and answer.strip()
        assert is_equivalent(answer, answer)


def test_answers_are_right() -> None:
    # check the generators' answers against sympy, an independent computation
    transformations = (*standard_transformations, implicit_multiplication_application)
    rng = random.Random(0)
    for _ in range(30):
        question, answer = TOPICS["arithmetic"][0](rng, 2)
        assert sympy.Integer(answer) == parse_expr(question.removeprefix("Compute ").removesuffix("."))
    x = sympy.Symbol("x")
    for _ in range(30):
        question, answer = TOPICS["algebra"][0](rng, 3)
        left, right = (parse_expr(side, transformations=transformations) for side in question.split("$")[3].split("="))
        assert sympy.solve(sympy.Eq(left, right), x) == [sympy.Rational(answer)]
    for _ in range(30):
        question, answer = TOPICS["algebra"][1](rng, 3)
        system = [s.split("=") for s in question.split("$")[1::2][:2]]
        y = sympy.Symbol("y")
        equations = [sympy.Eq(*(parse_expr(side, transformations=transformations) for side in eq)) for eq in system]
        solution = sympy.solve(equations, [x, y])
        assert f"({solution[x]}, {solution[y]})" == answer


def test_seeded_and_endless() -> None:
    env = ProceduralMathEnv(difficulty="hard")
    twin = ProceduralMathEnv(difficulty="hard")
    assert env.reset(seed=5) == twin.reset(seed=5)
    questions = {env.reset()[0] for _ in range(200)}
    assert len(questions) > 190


def test_rewards() -> None:
    env = gem.make("math:Algebra-v0-medium", format_error_reward=-0.1)
    env.reset(seed=1)
    assert env.step(rf"\boxed{{{env.answer}}}")[1] == 1.0
    env.reset(seed=1)
    assert env.step("no idea")[1] == -0.1
    env.reset(seed=1)
    assert env.step("no idea")[4]["format_error"] is True
    env.reset(seed=1)
    assert env.step(rf"\boxed{{{env.answer}}}")[4]["format_error"] is False
    with pytest.raises(ValueError, match="difficulty"):
        ProceduralMathEnv(difficulty="impossible")
    with pytest.raises(ValueError, match="topic"):
        ProceduralMathEnv(topics=["poetry"])


@pytest.mark.parametrize("env_id", [f"math:{n}-v0-{d}" for n in PROCEDURAL for d in DIFFICULTIES])
def test_check_env_on_every_procedural_id(env_id: str) -> None:
    check_env(gem.make(env_id), num_random_strings=10)
