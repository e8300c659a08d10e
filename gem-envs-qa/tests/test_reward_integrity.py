"""Red-team findings on QA scoring: empty answers, candidate lists, huge answers and
junk searches must not earn what a correct answer earns."""

from __future__ import annotations

import gem
from gem.testing import scripted_return
from gem_envs_qa import metrics
from gem_envs_qa.env import QaEnv


def _answer(text: str) -> str:
    return f"<think>...</think> <answer>{text}</answer>"


def test_an_empty_answer_never_matches_a_gold_that_normalises_to_nothing() -> None:
    for env_id in ("eval:TriviaQA", "eval:QaOpen"):
        env = gem.make(env_id)
        odd = [i for i, r in enumerate(env.records) if any(not metrics.normalize_answer(a) for a in r["answer"])]
        assert odd, f"{env_id} has no gold answer made only of punctuation or articles any more"
        for i in odd:
            env.reset(idx=i)
            assert env.step(_answer(""))[1] == 0.0, (env_id, env.records[i]["answer"])
            assert env.step(_answer("   the ... "))[1] == 0.0
            # the gold itself, written out, still scores
            env.reset(idx=i)
            gold = next(a for a in env.records[i]["answer"] if not metrics.normalize_answer(a))
            assert env.step(_answer(gold))[1] == 1.0, gold


def test_punctuation_golds_compare_in_their_light_form() -> None:
    assert metrics.exact_match("A+", ["A+"]) and metrics.exact_match(" a+ ", ["A+"])
    assert not metrics.exact_match("A", ["A+"]) and not metrics.exact_match("", ["+-*/", "---"])
    assert metrics.f1_score("", [""]) == 0.0 and metrics.f1_score("+-*/", ["+-*/"]) == 1.0


def test_listing_candidates_does_not_answer_fanoutqa() -> None:
    env = gem.make("eval:FanOutQA")
    listing = "right left " + " ".join(map(str, range(1000)))
    short_listing = "right left " + " ".join(map(str, range(60)))
    scored = []
    for i in range(len(env.records)):
        for text in (listing, short_listing):
            env.reset(idx=i)
            if env.step(_answer(text))[1] > 0:
                scored.append((i, text[:20]))
    assert scored == []
    # stating the parts still answers every multi-part question
    multi = [i for i, r in enumerate(env.records) if r.get("answer_parts")]
    for i in multi:
        env.reset(idx=i)
        parts = env.records[i]["answer_parts"]
        assert env.step(_answer("The answers are " + " and ".join(parts) + "."))[1] == 1.0, parts


def test_huge_answers_are_not_normalised(monkeypatch) -> None:
    seen: list[int] = []
    original = metrics.normalize_answer

    def recording(text: str) -> str:
        seen.append(len(text))
        return original(text)

    monkeypatch.setattr(metrics, "normalize_answer", recording)
    env = QaEnv(dataset=[{"question": "Capital of France?", "answer": ["Paris"]}])
    env.reset(idx=0)
    padded = "Paris" + " ." * 4_000_000  # 8 MB that normalises to "paris"
    _, reward, terminated, _, info = env.step(_answer(padded))
    assert (reward, terminated, info["correct"]) == (0.0, True, False)
    assert all(n <= metrics.length_limit(["Paris"]) for n in seen)


def test_junk_searches_then_a_wrong_answer_earn_less_than_a_correct_answer() -> None:
    def episode(actions: list[str]) -> float:
        return scripted_return(gem.make("qa:TriviaQA-search"), actions, idx=0)

    gold = gem.make("eval:TriviaQA").records[0]["answer"][0]
    junk = ["<search> zzzz </search>"] * 5
    farmed = episode([*junk, _answer("certainly not this")])
    honest = episode([_answer(gold)])
    assert honest == 1.0 and farmed < honest and farmed == 0.0
    # searching and then answering correctly still earns the preset's search reward
    assert episode([*junk[:2], _answer(gold)]) > honest
