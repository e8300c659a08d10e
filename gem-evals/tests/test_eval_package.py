"""gem-evals as a package of its own: `gem eval` through the plugin hook, local engines and
model opponents found through entry points, the old `gem.eval` paths handed to the compat
table, the HTTP client's proxy rule, and the modules' docstring examples."""

from __future__ import annotations

import doctest
import importlib
import io
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

import gem_evals
from gem.cli import main as gem_main
from gem.errors import EntryPointError
from gem.multiagent import AgentSelector, MultiAgentEnv, OpponentEnv
from gem_evals import EvalConfig, evaluate, local_engines, plugin
from gem_evals.models import ModelSpecError
from gem_evals.progress import Progress
from gem_evals.testing_server import ScriptedServer


def test_gem_eval_is_registered_by_the_gem_evals_plugin(gem_plugins_catalog):
    [info] = [p for p in gem_plugins_catalog.plugins if p.distribution == "gem-evals"]
    assert info.status == "ok" and info.counts.get("commands") == 1
    assert gem_plugins_catalog.commands.get("eval").factory is plugin.run_eval


def test_without_gem_evals_gem_eval_names_the_package_to_install(gem_catalog, monkeypatch, capsys):
    real = metadata.distribution

    def distribution(name):
        if name == "gem-evals":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", distribution)
    assert gem_main(["eval", "game:GuessTheNumber-v0-easy", "--model", "openai:x"]) == 2
    assert capsys.readouterr().err == ("gem: gem eval is provided by gem-evals; install it from the root of a clone "
                                       "of the GEM repository: pip install -e gem-core -e gem-evals\n")


def test_the_old_module_paths_are_handed_to_the_compat_table():
    calls = []
    plugin.gem_register_compat(SimpleNamespace(register=lambda old, new: calls.append((old, new))))
    assert calls[0] == ("gem.eval", "gem_evals")
    package = Path(gem_evals.__file__).parent
    # modules added after the move (opponent; connect, split from models) never had a gem.eval path
    moved = {p.stem for p in package.glob("*.py")} - {"__init__", "plugin", "opponent", "connect"}
    assert {old for old, _ in calls[1:]} == {f"gem.eval.{name}" for name in moved}
    for _, new in calls:
        importlib.import_module(new)


def test_the_scripted_server_runs_from_the_command_line():
    proc = subprocess.Popen([sys.executable, "-m", "gem_evals.testing_server", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving http://127.0.0.1:"), line
        base_url = line.split()[1]
        models = httpx.get(base_url + "/models", timeout=30, trust_env=False).json()
        assert [m["id"] for m in models["data"]] == ["bisect"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_proxy_in_the_environment_does_not_capture_loopback_requests(count_registry, monkeypatch, tmp_path):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    with ScriptedServer() as server:
        result = evaluate(EvalConfig(["test:Count-v0"], model=server.base_url, episodes=2, progress=False,
                                     output=tmp_path / "out"))
    assert result.summaries[0]["errors"] == 0 and server.answered > 0


class EchoEngine:
    """A local engine in the shape gem-train's provides: it answers every chat with ``\\boxed{5}``
    and remembers the size of each batch it was given."""

    batches: list[int] = []

    def __init__(self, kind, path, max_model_len=4096):
        self.kind, self.path = kind, path

    def encode(self, messages):
        return list(json.dumps(messages).encode())

    def generate(self, prompts, sampling):
        EchoEngine.batches.append(len(prompts))
        return [SimpleNamespace(token_ids=list(b"\\boxed{5}"), finish_reason="stop") for _ in prompts]

    def decode(self, token_ids):
        return bytes(token_ids).decode()

    def close(self):
        pass


def _engines(monkeypatch, entry_points):
    def select(group=None, name=None, **kw):
        if group == local_engines.ENGINE_GROUP:
            return [ep for ep in entry_points if ep.name == name]
        return metadata.entry_points(group=group, name=name, **kw)

    monkeypatch.setattr(local_engines.metadata, "entry_points", select)


def test_local_models_run_on_the_engine_an_entry_point_names_batching_concurrent_episodes(count_registry,
                                                                                        monkeypatch, tmp_path):
    _engines(monkeypatch, [metadata.EntryPoint("hf", f"{__name__}:EchoEngine", local_engines.ENGINE_GROUP)])
    EchoEngine.batches = []
    result = evaluate(EvalConfig(["test:Count-v0"], model="hf:/models/echo", episodes=8, concurrency=8,
                                 progress=False, output=tmp_path / "out"))
    [row] = result.summaries
    assert row["rollouts"] == 8 and row["errors"] == 0
    records = [json.loads(line) for line in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert {r["model"] for r in records} == {"hf:/models/echo"}
    assert all(set(r["actions"]) == {"\\boxed{5}"} for r in records)
    assert max(EchoEngine.batches) > 1 and sum(EchoEngine.batches) == sum(r["turns"] for r in records)


def test_a_local_model_kind_no_package_provides_says_to_install_gem_train(monkeypatch):
    _engines(monkeypatch, [])
    with pytest.raises(ModelSpecError) as info:
        local_engines.EngineChatModel("hf", "/models/any")
    assert str(info.value) == ("--model hf:PATH runs the model with gem-train's engines; install gem-train from the "
                               "root of a clone of the GEM repository: pip install torch==2.13.0 && "
                               "pip install -e gem-core -e gem-envs-games -e gem-train")


class Duel(MultiAgentEnv):
    """Two seats; one move each, then the game ends."""

    default_opponent = "random"

    def __init__(self):
        super().__init__()
        self.possible_agents = ["a", "b"]
        self.agent_selector = AgentSelector(self.possible_agents, mode="sequential")

    def observe(self, agent):
        return f"{agent}: your move"

    def _process_actions(self, actions):
        ((agent, action),) = actions.items()
        if agent == "b":
            self.terminations = dict.fromkeys(self.agents, True)
        return {agent: "ok"}, {agent: 0.0}, self.terminations, self.truncations, {}

    def sample_random_action(self, agent=None):
        return "pass"


def test_model_opponents_come_from_gem_evals(monkeypatch):
    with ScriptedServer() as server:
        env = OpponentEnv(Duel(), opponent="model:openai:constant:hello", opponent_base_url=server.base_url)
        env.reset(seed=0)
        *_, info = env.step("mine")
    assert info["opponent_actions"] == [{"b": "hello"}]
    monkeypatch.setattr("gem.multiagent.opponent.metadata.entry_points", lambda **kw: [])
    with pytest.raises(EntryPointError, match="pip install -e gem-core -e gem-evals"):
        OpponentEnv(Duel(), opponent="model:openai:constant:hello")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_progress_is_a_bar_redrawn_in_place_with_the_success_rate():
    stream = Terminal()
    bar = Progress("test:Count-v0", 10, done=2, successes=1, stream=stream)
    for i in range(8):
        bar.update(success=i % 2 == 0, error=i == 7)
    bar.close()
    text = stream.getvalue()
    assert "\n" not in text[:-1] and text.endswith("\n")  # one line, redrawn with carriage returns
    last = text.rstrip("\n").split("\r")[-1]
    assert last.startswith("test:Count-v0: 100%") and "10/10" in last
    assert "success 0.500  errors 1, 2 resumed" in last


@pytest.mark.parametrize("module", ["evaluation", "metrics", "models", "records", "testing_server"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(f"gem_evals.{module}"))
    assert result.failed == 0
