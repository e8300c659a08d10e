"""``eval:MATH500`` behind gem-tools' ``python_tool`` wrapper: padding a right answer with
tool calls earns at most one call's worth, failed calls earn nothing, and junk calls never
lift a wrong answer."""

from __future__ import annotations

import pytest

import gem
from gem.testing import scripted_return

pytest.importorskip("gem_tools", reason="needs gem-tools, which gem-envs-math's own nox session does not install")
from gem.wrappers import get_wrapper_fns


def play(env, actions: list[str]) -> float:
    return scripted_return(env, actions, idx=0)


@pytest.fixture(scope="module")
def math500():
    (wrap,) = get_wrapper_fns("python_tool")
    return wrap(gem.make("eval:MATH500"))


def test_padding_a_right_answer_pays_one_call_at_most(math500):
    math500.reset(idx=0)
    right = rf"\boxed{{{math500.unwrapped.answer}}}"
    junk = [f"<python>print({i})</python>" for i in range(5)]
    assert play(math500, [right]) == 1.0
    assert play(math500, [*junk, right]) == pytest.approx(1.3)  # the reference pays 2.5
    assert play(math500, ["<python>print(0)</python>"] * 5 + [right]) == pytest.approx(1.3)


def test_failed_calls_pay_nothing_and_junk_never_lifts_a_wrong_answer(math500):
    math500.reset(idx=0)
    right = rf"\boxed{{{math500.unwrapped.answer}}}"
    assert play(math500, ["<python>1/0</python>"] * 5 + [right]) == 1.0
    assert play(math500, [f"<python>print({i})</python>" for i in range(5)] + [r"\boxed{12345}"]) == 0.0
