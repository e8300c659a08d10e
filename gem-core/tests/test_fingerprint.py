"""Env fingerprints (issue 37): the same env gives the same fingerprint, and it changes when (only when) the env's
code, data, arguments or prompt change; the runner's trajectories carry it."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest

import gem
from gem.data.env import DatasetEnv
from gem.fingerprint import env_fingerprint
from gem.runner import run
from gem.testing.envs import CountEnv
from gem.wrappers import apply_wrappers

ENV_MODULE = '''
import gem

PROMPT = "Guess a number from 1 to {high}."
UNUSED = "nothing reads this"


def _score(guess, target):
    return 1.0 if guess == target else 0.0


class Guess(gem.Env):
    """A guessing game."""

    def __init__(self, high=4):
        self.high = high

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.target = self.rng.randint(1, self.high)
        return PROMPT.format(high=self.high), {}

    def step(self, action):
        return "", _score(action.strip(), str(self.target)), True, False, {}
'''


def load(tmp_path, source: str, name: str = "fingerprinted_env"):
    """Import ``source`` as module ``name`` (a later call replaces it: an edited file, as after a change)."""
    folder = tmp_path / f"v{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fingerprint_of(tmp_path):
    def of(source: str, **kwargs) -> str:
        return env_fingerprint(load(tmp_path, source).Guess(**kwargs))

    yield of
    sys.modules.pop("fingerprinted_env", None)


def test_the_same_env_has_the_same_fingerprint(fingerprint_of):
    assert fingerprint_of(ENV_MODULE) == fingerprint_of(ENV_MODULE) == fingerprint_of(ENV_MODULE, high=4)
    assert len(fingerprint_of(ENV_MODULE)) == 16


@pytest.mark.parametrize("edit", [
    ('"""A guessing game."""', '"""A guessing game, documented better."""'),  # a docstring
    ("    def step(self, action):", "    # the one step\n    def step(self, action):"),  # a comment
    ('UNUSED = "nothing reads this"', 'UNUSED = "still nothing"'),  # a constant the env does not read
])
def test_what_does_not_decide_an_episode_leaves_it_alone(fingerprint_of, edit):
    assert fingerprint_of(ENV_MODULE.replace(*edit)) == fingerprint_of(ENV_MODULE)


@pytest.mark.parametrize("edit", [
    ('return 1.0 if guess == target else 0.0', 'return 1.0 if guess in target else 0.0'),  # a helper it calls
    ('"Guess a number from 1 to {high}."', '"Guess a whole number from 1 to {high}."'),  # the prompt template
    ('return "", _score', 'return "done", _score'),  # the env's own code
])
def test_code_and_prompt_changes_change_it(fingerprint_of, edit):
    assert fingerprint_of(ENV_MODULE.replace(*edit)) != fingerprint_of(ENV_MODULE)


def test_arguments_data_and_wrappers_change_it():
    assert env_fingerprint(CountEnv(high=10)) != env_fingerprint(CountEnv(high=11))

    class Echo(DatasetEnv):
        def pose(self, record):
            return record["q"]

        def step(self, action):
            return "", float(action == self.record["a"]), True, False, {}

    data = [{"q": "1+1", "a": "2"}, {"q": "2+2", "a": "4"}]
    assert env_fingerprint(Echo(data)) == env_fingerprint(Echo([dict(r) for r in data]))
    assert env_fingerprint(Echo(data)) != env_fingerprint(Echo([*data[:1], {"q": "2+2", "a": "5"}]))
    assert env_fingerprint(apply_wrappers(CountEnv(), "messages")) != env_fingerprint(CountEnv())


def test_gem_make_records_the_arguments_it_built_with(gem_registry):
    gem_registry.register("test:Count-v0", CountEnv, high=10)
    assert env_fingerprint(gem.make("test:Count-v0")) == env_fingerprint(gem.make("test:Count-v0", high=10))
    assert env_fingerprint(gem.make("test:Count-v0")) != env_fingerprint(gem.make("test:Count-v0", high=12))


def test_trajectories_carry_it():
    async def act(observation):
        return "\\boxed{5}"

    trajectories = run(lambda: CountEnv(high=10), act, seeds=[0, 1])
    assert {t.fingerprint for t in trajectories} == {env_fingerprint(CountEnv(high=10))}


def test_a_parse_that_another_thread_tripped_is_parsed_again(monkeypatch):
    """CPython 3.11's AST builder shares one recursion counter between threads (python/cpython#106905): a parse
    that overlapped another thread's raised SystemError in a CI run (gem-evals' import-graph test). Once is retried;
    another SystemError is not hidden."""
    import ast

    from gem.fingerprint import parse_source

    real, calls = ast.parse, []

    def flaky(source, filename="<unknown>"):
        calls.append(filename)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=120, after=174)")
        return real(source, filename)

    monkeypatch.setattr(ast, "parse", flaky)
    assert isinstance(parse_source("x = 1", "m.py"), ast.Module) and calls == ["m.py", "m.py"]

    def broken(source, filename="<unknown>"):
        raise SystemError("something else")

    monkeypatch.setattr(ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        parse_source("x = 1")


def test_a_class_source_that_another_thread_tripped_is_read_again(monkeypatch):
    """``inspect.getsource`` of a class parses its whole module, so the same race can trip it: a CI run's eval
    fingerprinted a changed env as None there and resumed a folder of the env's old version. It is read again."""
    import inspect

    from gem.fingerprint import code_fingerprint

    class Local(CountEnv):
        def step(self, action):
            return super().step(action)

    expected = code_fingerprint(Local)
    code_fingerprint.cache_clear()
    real, calls = inspect.getsource, []

    def flaky(obj):
        calls.append(obj)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=3, after=9)")
        return real(obj)

    monkeypatch.setattr(inspect, "getsource", flaky)
    try:
        assert code_fingerprint(Local) == expected and calls[:2] == [Local, Local]
    finally:
        code_fingerprint.cache_clear()
