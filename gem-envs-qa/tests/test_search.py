"""Search-augmented QA: the multi-turn flow, tool budgets and sources, the offline corpus
and its retrieval recall."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest

import gem
from gem.testing import check_env
from gem_envs_qa import corpus, recall
from gem_envs_qa.env import TERMINAL_STATE
from gem_envs_qa.plugin import SEARCH_IDS
from gem_envs_qa.search import SearchQaEnv
from gem_envs_qa.sources import load_packaged
from gem_tools.search import BM25Index
from gem_tools.search.server import make_server


def test_search_then_answer() -> None:
    env = gem.make("qa:SQuAD-search")
    assert env.env_id == "qa:SQuAD-search"
    obs, info = env.reset(idx=0)
    assert "Question: Harvard - Yale Regatta" in obs and "<search>" in obs and info["tool_use_counter"] == 0
    obs, reward, terminated, truncated, info = env.step("<think>look</think> <search> Harvard Yale Regatta </search>")
    assert obs.strip().startswith("<information>Doc 1(Title: Harvard University)") and "23 years" in obs
    # GEM's search_tool preset earns 0.3 per search, paid when the answer is right
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["use_tool"] and info["tool_use_counter"] == 1 and info["tool_reward_pending"] == pytest.approx(0.3)
    obs, reward, terminated, _, info = env.step("<answer>23 years</answer>")
    assert (obs, terminated, info["correct"], info["tool_use_counter"]) == (TERMINAL_STATE, True, True, 1)
    assert reward == pytest.approx(1.3) and info["tool_reward_credited"] == pytest.approx(0.3)


def test_tool_budget_then_the_env_answers() -> None:
    env = gem.make("qa:TriviaQA-search", preset="search_tool_no_int_reward", max_tool_uses=2)
    env.reset(seed=0)
    assert env.step("<search>a</search>")[1:3] == (0.0, False)
    obs, reward, terminated, _, _ = env.step("<search>b</search>")
    assert "maximum number of tool use" in obs and not terminated
    _, reward, terminated, _, info = env.step("<search>c</search>")  # over budget: graded, no answer tag
    assert (reward, terminated, info["format_error"]) == (0.0, True, True)
    with pytest.raises(ValueError, match="not a search-tool preset"):
        SearchQaEnv(source="nq-open", preset="python_tool")


def test_own_corpus_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.jsonl"
    rows = [{"title": "Hamlet", "text": "Hamlet is a tragedy written by William Shakespeare."},
            {"title": "Nile", "text": "The Nile is the longest river in Africa."}]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows))
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "Who wrote Hamlet?", "answer": "Shakespeare"}))
    env = SearchQaEnv(corpus=str(path), source=str(questions), topk=1)
    env.reset()
    obs = env.step("<search>who wrote hamlet</search>")[0]
    assert "Title: Hamlet" in obs and "Nile" not in obs
    assert env.step("<answer>William Shakespeare</answer>")[1] == 0.0  # EM: the alias is "Shakespeare"
    env.reset()
    assert env.step("<answer>Shakespeare</answer>")[1] == 1.0


def test_retrieval_server() -> None:
    server = make_server(BM25Index([{"title": "Nile", "text": "The Nile is the longest river in Africa."}]))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        env = SearchQaEnv(search_url=f"http://{host}:{port}/retrieve", dataset=[{"question": "Longest river?",
                                                                                   "answer": ["Nile"]}])  # fmt: skip
        env.reset()
        assert "longest river in Africa" in env.step("<search>longest river</search>")[0]
    finally:
        server.shutdown()
        server.server_close()


def test_spawn_shares_the_index() -> None:
    env = gem.make("qa:FanOutQA-search")
    twin = env.spawn()
    assert twin.env_id == env.env_id and twin.tools[0].index is env.tools[0].index
    env.reset(idx=0)  # the 1998 MLB draft question: Right, Left
    env.step("<search> 1998 MLB draft </search>")
    clone = env.spawn(same_state=True)
    # the clone carries the search reward earned so far: paid with the correct answer
    assert clone.tool_use_counter == 1 and clone.step("<answer>Right, Left</answer>")[1] == pytest.approx(1.3)


def test_concurrent_searches_in_the_thread_backend() -> None:
    queries = [f"<search> {q['question']} </search>" for q in load_packaged("squad")[:16]]
    expected = []
    for query in queries:
        env = gem.make("qa:SQuAD-search")
        env.reset(idx=0)
        expected.append(env.step(query)[0])
    envs = gem.make_vec(["qa:SQuAD-search"] * 16, backend="thread", seed=0)
    try:
        envs.reset()
        observations = envs.step(queries)[0]
    finally:
        envs.close()
    assert list(observations) == expected


@pytest.mark.parametrize("env_id", sorted(SEARCH_IDS))
def test_check_env_on_every_search_id(env_id: str) -> None:
    check_env(gem.make(env_id))


def test_corpus_file_is_written_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEM_QA_CACHE_DIR", str(tmp_path))
    path = corpus.corpus_path()
    assert path == tmp_path / f"{corpus.CORPUS_VERSION}.jsonl"
    documents = [json.loads(line) for line in path.read_text().splitlines()]
    counts = {name: sum(d["source"] == name for d in documents) for name in corpus.CORPUS_SOURCES}
    assert counts == {"squad": 803, "boolq": 12266, "drop": 405, "jeopardy": 2116, "fanoutqa": 2115}
    assert all(d["contents"] == f"{d['title']}\n{d['text']}" and d["text"] for d in documents)
    assert len({d["id"] for d in documents}) == len(documents)
    stamp = path.stat().st_mtime_ns
    assert corpus.corpus_path() == path and path.stat().st_mtime_ns == stamp  # cached, not rewritten
    assert not list(tmp_path.glob("*.tmp"))


def test_recall_on_datasets_the_corpus_covers() -> None:
    index = corpus.shared_index()
    squad = recall.retrieval_recall(load_packaged("squad"), index, ks=(1, 5), sample=200)
    assert squad["questions"] == 200 and squad["recall@5"] >= 0.85
    subquestions = recall.retrieval_recall(recall.fanoutqa_subquestions(), index, ks=(1,), sample=200)
    assert subquestions["recall@1"] >= 0.95
    fanout = recall.retrieval_recall(load_packaged("fanoutqa"), index, ks=(10,), sample=None)
    assert 0.3 <= fanout["recall@10"] < 1.0  # one search finds some parts of a fan-out answer, never all


def test_recall_beats_chance_on_open_domain_questions() -> None:
    # thin coverage, but far above what the same passages give for someone else's answer
    index = corpus.shared_index()
    questions = list(load_packaged("triviaqa"))
    answers = [q["answer"] for q in questions]
    random.Random(1).shuffle(answers)
    mismatched = [{"question": q["question"], "answer": a} for q, a in zip(questions, answers)]
    real = recall.retrieval_recall(questions, index, ks=(10,), sample=300)["recall@10"]
    chance = recall.retrieval_recall(mismatched, index, ks=(10,), sample=300)["recall@10"]
    assert real >= 0.12 and real > 4 * chance


def test_recall_cli_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "recall.json"
    assert recall.cli(["--sample", "20", "--k", "1,5", "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert set(table) == {"triviaqa", "nq-open", "fanoutqa", "squad", "fanoutqa-subquestions"}
    assert all(set(row) == {"questions", "recall@1", "recall@5"} for row in table.values())
    assert "squad" in capsys.readouterr().out
