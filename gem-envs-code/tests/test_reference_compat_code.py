"""A reference user's CodeEnv code, written the way the reference's own test_code.py and
evaluation loops write it: a Hugging Face-style dataset of ``problem``/``tests``, the
reference's constructor arguments, ``env.tests`` read and assigned, and the single-turn
5-tuple ending ``terminated=True, truncated=True``."""

from gem.core import TERMINAL_STATE

# the reference path, resolved by gem.compat's table
from gem.envs.code_env import CodeEnv

ADD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
ROWS = [
    {
        "problem": "Read two integers, print their sum.",
        "tests": {"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]},
    }
]


def make_env() -> CodeEnv:
    return CodeEnv(dataset=ROWS, dataset_name="single_example", max_tests=3, verbose=True)


def test_reference_test_code_pattern_reads_tests_and_grades():
    env = make_env()
    env.reset()
    assert env.tests == {"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]}
    obs, reward, terminated, truncated, _ = env.step(ADD)
    assert (obs, reward, terminated, truncated) == (TERMINAL_STATE, 1.0, True, True)


def test_assigned_tests_grade_the_next_answer_until_reset():
    env = make_env()
    env.reset()
    env.tests = {"inputs": ["1 2\n"], "outputs": ["4\n"]}  # the reference's eval loop swaps tests in
    assert env.step(ADD)[1] == 0.0
    env.reset()
    assert env.tests["outputs"] == ["3\n", "12\n"]  # reset poses the record's own tests again


def test_format_error_also_ends_truncated():
    env = make_env()
    env.reset()
    assert env.step("no code here")[2:4] == (True, True)


def test_multi_turn_is_not_truncated_on_success():
    env = CodeEnv(dataset=ROWS, max_turns=2)
    env.reset()
    assert env.step(ADD)[1:4] == (1.0, True, False)
