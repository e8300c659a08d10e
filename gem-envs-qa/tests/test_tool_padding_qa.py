"""``qa:SQuAD-search`` (GEM's ``search_tool`` shaping, 0.3 a search): padding a right
answer with searches earns at most one search's worth, and searches never lift a wrong
answer."""

from __future__ import annotations

import pytest

import gem
from gem.testing import scripted_return


def play(env, actions: list[str]) -> float:
    return scripted_return(env, actions, idx=0)


@pytest.fixture(scope="module")
def squad():
    return gem.make("qa:SQuAD-search")


def test_padding_a_right_answer_pays_one_search_at_most(squad):
    right = "<answer>23 years</answer>"
    junk = [f"<search> junk query {i} </search>" for i in range(5)]
    assert play(squad, [right]) == 1.0
    assert play(squad, [*junk, right]) == pytest.approx(1.3)  # the reference pays 2.5
    assert play(squad, ["<search> Harvard Yale Regatta </search>"] * 5 + [right]) == pytest.approx(1.3)


def test_searches_never_lift_a_wrong_answer(squad):
    junk = [f"<search> junk query {i} </search>" for i in range(5)]
    assert play(squad, [*junk, "<answer>42 years</answer>"]) == 0.0
    assert play(squad, [*junk, "no answer at all"]) <= 0.0
