"""What each tool shows the agent, compared with the reference package's text for the
same call (a model trained on one sees the same text on the other), and the reference's
``SearchTool(topk=3, timeout=5)``, which builds without a server and fails at its first call."""

from __future__ import annotations

import pytest

from gem_tools.python_tool import PythonCodeTool
from gem_tools.search import BM25Index, SearchTool, format_passages
from gem_tools.search.bm25 import Hit

NEEDS_A_SOURCE = "SearchTool needs exactly one source"


def reference_passages(result: list[dict]) -> str:
    """The reference's passage text for a retrieval server's result, written out from
    its ``SearchTool._passages2string``: ``Doc i(Title: first line) the other lines``."""
    text = ""
    for i, item in enumerate(result, start=1):
        title, *rest = item["document"]["contents"].split("\n")
        text += f"Doc {i}(Title: {title}) " + "\n".join(rest) + "\n"
    return text


def test_python_observations_are_the_references():
    tool = PythonCodeTool(timeout=5)
    assert tool.execute_action("<python>print(6 * 7)</python>").observation == "Code execution result: 42\n\n"
    last_line = PythonCodeTool(timeout=5, keep_error_last_line=True)
    failed = last_line.execute_action("<python>print('a')\nraise ValueError('boom')</python>")
    assert failed.has_error and failed.observation == "Code execution result: a\n\nValueError: boom\n"


def test_python_timeout_reads_as_the_references():
    tool = PythonCodeTool(timeout=1)
    result = tool.execute_action("<python>while True: pass</python>")
    assert result.has_error and result.observation == "Code execution result: Execution timed out after 1 seconds.\n"


def test_a_loop_stopped_by_its_cpu_limit_reads_as_the_timeout_too():
    """A busy loop meets RLIMIT_CPU (the timeout in CPU seconds) as it meets the wall clock: which stops it
    first is a race (CI once saw the CPU limit win), and the agent reads the same words either way. The
    program here plays the CPU limit's signal itself, so the CPU limit always wins."""
    tool = PythonCodeTool(timeout=1)
    result = tool.execute_action("<python>import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)</python>")
    assert result.has_error and result.observation == "Code execution result: Execution timed out after 1 seconds.\n"


def test_search_passages_are_the_references_inside_information_tags():
    rows = [{"contents": "Paris\nParis is the capital of France.\nIt lies on the Seine."},
            {"contents": "Rome\nRome is the capital of Italy."}]  # fmt: skip
    hits = [Hit(document=row, score=1.0) for row in rows]
    assert format_passages(hits) == reference_passages([{"document": row} for row in rows])
    tool = SearchTool(index=BM25Index(rows), topk=1)
    result = tool.execute_action("<search>capital of Italy</search>")
    assert result.observation == f"\n\n<information>{reference_passages([{'document': rows[1]}])}</information>\n\n"


def test_the_reference_wrapper_factorys_search_tool_builds_without_a_url(monkeypatch):
    monkeypatch.delenv("SEARCH_URL", raising=False)
    tool = SearchTool(topk=3, timeout=5)  # what the reference's WRAPPER_FACTORY builds at import
    assert (tool.topk, tool.timeout) == (3, 5)
    assert not tool.execute_action("no call here").parsed
    with pytest.raises(ValueError, match=NEEDS_A_SOURCE):
        tool.execute_action("<search>capital of France</search>")


@pytest.mark.asyncio
async def test_a_search_url_set_after_construction_is_used(monkeypatch):
    monkeypatch.delenv("SEARCH_URL", raising=False)
    tool = SearchTool(topk=1)
    monkeypatch.setenv("SEARCH_URL", "http://127.0.0.1:1/retrieve")  # nothing listens there
    result = await tool.aexecute_action("<search>x</search>")
    assert result.parsed and result.has_error and "SearchTool Error" in result.observation
    assert tool.search_url == "http://127.0.0.1:1/retrieve"
