from __future__ import annotations

import os

import pytest
from conftest import fenced

import gem
from gem_envs_code.env import TERMINAL_STATE, CodeEnv
from gem_envs_code.problems import AssertTest, IOTest, Problem

ADD = Problem("add", "Print the sum of the two numbers on the input line.",
              (IOTest("1 2\n", "3\n"), IOTest("10 20", "30"), IOTest("-1 1", "0")))  # fmt: skip
SQUARE = Problem("square", "Write square(x).", tuple(AssertTest(f"assert square({x}) == {x * x}") for x in (1, 2, 3)),
                 entry_point="square")  # fmt: skip


def make(problems=(ADD,), **kw) -> CodeEnv:
    # a generous limit: a right answer's first sandbox start on a loaded 2-core CI machine once took over 3 s
    # (scored 0); the tests of the limits set their own
    env = CodeEnv(dataset=problems, **{"test_timeout": 30, **kw})
    env.reset(seed=0)
    return env


def test_correct_wrong_and_no_code() -> None:
    env = make()
    step = env.step(fenced("a, b = map(int, input().split())\nprint(a + b, ' ')"))
    assert step[1:3] == (1.0, True), str(step[4])
    env.reset()
    obs, reward, terminated, truncated, info = env.step(fenced("print(3)"))
    # single-turn: truncated too, as the reference
    assert (obs, reward, terminated, truncated) == (TERMINAL_STATE, 0.0, True, True)
    assert info["correct"] is False and info["first_failure"] == "test 2: wrong answer"
    assert info["format_error"] is False
    env.reset()
    obs, reward, terminated, _, info = env.step("a + b")
    assert reward == -0.1 and terminated and info["format_error"]


def test_output_is_compared_trimmed() -> None:
    env = make((Problem("lines", "p", (IOTest("", "a\nb\n"),)),))
    assert env.step(fenced("print('a  ')\nprint('b')\nprint()\n"))[1] == 1.0
    env.reset()
    assert env.step(fenced("print('a b')"))[1] == 0.0


def test_stops_at_first_failure_unless_partial_credit() -> None:
    wrong_on_first = fenced("a, b = map(int, input().split())\nprint(a + b if a != 1 else 0)")
    env = make(max_workers=1)
    info = env.step(wrong_on_first)[4]
    assert (info["tests_run"], info["tests_passed"], info["tests_total"]) == (1, 0, 3)
    env = make(partial_credit=True)
    _, reward, _, _, info = env.step(wrong_on_first)
    assert reward == pytest.approx(2 / 3) and (info["tests_run"], info["tests_passed"]) == (3, 2)


def test_first_failure_is_the_lowest_index_whatever_the_timing() -> None:
    # test 1 fails slowly, test 2 fails at once: the report names test 1
    slow_first = fenced("import time\na, b = map(int, input().split())\nif a == 1: time.sleep(0.5)\nprint('x')")
    env = make(max_workers=3)
    assert env.step(slow_first)[4]["first_failure"] == "test 1: wrong answer"


def test_function_tests_and_partial_credit() -> None:
    env = make((SQUARE,), partial_credit=True)
    assert env.step(fenced("def square(x):\n    return x * x"))[1] == 1.0
    env.reset()
    assert env.step(fenced("def square(x):\n    return x if x == 1 else 0"))[1] == pytest.approx(1 / 3)


def test_timeouts_and_total_budget() -> None:
    env = make(test_timeout=0.5)
    info = env.step(fenced("while True: pass"))[4]
    assert "timed out" in info["first_failure"]
    # test 1 passes at once, test 2 sleeps past what is left of the total budget and is
    # cut short, test 3 finds no budget left
    env = make(max_workers=1, test_timeout=30, total_timeout=2, partial_credit=True)
    program = "import time\na, b = map(int, input().split())\nif a == 10: time.sleep(60)\nprint(a + b)"
    report = env.runner.run(ADD, program, stop_on_failure=False)
    assert [r.passed for r in report.results] == [True, False, False]
    assert "timed out" in report.results[1].message
    assert report.results[2].message == "total time budget exhausted"


def test_multi_turn_shows_the_failing_stdio_test_then_rewards_the_final_attempt() -> None:
    env = make(max_turns=3, retry_penalty=0.1)
    obs, reward, terminated, _, info = env.step(fenced("a, b = map(int, input().split())\nprint(a * b)"))
    assert (reward, terminated) == (0.0, False)
    assert "failed test 1 of 3" in obs and "Input: 1 2" in obs and "Expected output: 3" in obs
    assert "Your output: 2" in obs and "2 attempts left" in obs
    obs, reward, terminated, _, _ = env.step(fenced("raise ValueError('boom')"))
    assert not terminated and "ValueError: boom" in obs and "1 attempt left" in obs
    _, reward, terminated, _, info = env.step(fenced("print(sum(map(int, input().split())))"))
    assert terminated and info["correct"] and info["attempt"] == 3
    assert reward == pytest.approx(0.8)


def test_multi_turn_function_feedback_shows_the_assert_and_the_value() -> None:
    env = make((SQUARE,), max_turns=2)
    obs = env.step(fenced("def square(x):\n    return x + 1"))[0]
    assert "Test: assert square(1) == 1" in obs and "Your function returned: 2" in obs
    _, reward, terminated, _, _ = env.step(fenced("def square(x):\n    return 0"))
    assert (reward, terminated) == (0.0, True)


def test_multi_turn_format_error_ends_the_episode() -> None:
    env = make(max_turns=3)
    assert env.step("no code")[1:3] == (-0.1, True)


def test_reset_order_and_state(humaneval) -> None:
    env = gem.make("eval:HumanEval")
    assert [env.reset()[1]["problem_id"] for _ in range(3)] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    shuffled = gem.make("code:HumanEval")
    first = [shuffled.reset(seed=7)[1]["idx"]] + [shuffled.reset()[1]["idx"] for _ in range(3)]
    assert first != [0, 1, 2, 3]
    assert [shuffled.reset(seed=7)[1]["idx"]] + [shuffled.reset()[1]["idx"] for _ in range(3)] == first
    state = shuffled.get_state()
    upcoming = shuffled.reset()[1]["idx"]
    shuffled.set_state(state)
    assert shuffled.reset()[1]["idx"] == upcoming
    assert env.reset(idx=163)[1]["problem_id"] == "HumanEval/163"


def test_reference_constructor_arguments() -> None:
    # the reference's CodeEnv(dataset_name, split, dataset, question_key, test_key, seed,
    # max_workers, max_tests, verbose, sandbox_type)
    from gem.errors import DataUnavailableError

    records = [{"problem": "Print the sum.", "tests": {"inputs": ["1 2", "3 4"], "outputs": ["3", "7"]}}]
    env = CodeEnv(dataset=records, question_key="problem", test_key="tests", seed=0, max_workers=2, max_tests=12,
                  verbose=False, sandbox_type="none")  # fmt: skip
    env.reset()
    assert env.step(fenced("print(sum(map(int, input().split())))"))[1] == 1.0
    with pytest.raises(DataUnavailableError, match="axon-rl/TACO-8k"):
        CodeEnv("axon-rl/TACO-8k", split="train")


@pytest.mark.asyncio
async def test_astep_runs_tests_as_async_subprocesses_without_a_thread_each() -> None:
    import asyncio
    import threading

    from gem_tools.sandbox import cgroups

    slow = Problem("slow", "p", tuple(AssertTest(f"assert slow({i}) == {i}") for i in range(4)), entry_point="slow")
    envs = [make((slow,), max_workers=4, test_timeout=20) for _ in range(4)]
    program = fenced("import time\ndef slow(x):\n    time.sleep(1.5)\n    return x")
    threads_before, seen_threads, seen_runs = threading.active_count(), [], []
    where = cgroups.support()

    async def watch() -> None:
        while True:
            seen_threads.append(threading.active_count())
            if where.memory is not None:
                seen_runs.append(sum(1 for p in where.memory.iterdir() if p.name.startswith(f"run-{os.getpid()}-")))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    results = await asyncio.gather(*(env.astep(program) for env in envs))
    watcher.cancel()
    assert [r[1] for r in results] == [1.0] * 4
    assert max(seen_threads) <= threads_before  # 16 tests, 32 sandboxed processes, no new thread
    if where.memory is not None:  # each test's program and judge have a cgroup: all 16 tests overlapped
        assert max(seen_runs) >= 2 * 16 - 4
