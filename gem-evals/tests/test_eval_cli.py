"""`gem eval` as a user runs it: the command line, and a run killed midway then resumed."""

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from gem.cli import main as gem_main
from gem_evals import EvalConfig, evaluate
from gem_evals.cli import build_parser
from gem_evals.records import EpisodeKey, EpisodeStore
from gem_evals.testing_server import ScriptedServer

GEM = [sys.executable, "-c", "import sys; from gem.cli import main; sys.exit(main())"]
EPISODES = 16


def eval_args(base_url, output, concurrency=2, episodes=EPISODES):
    return ["eval", "test:Count-v0", "--register", "test:Count-v0=gem.testing.envs:CountEnv",
            "--env-kwargs", '{"max_turns": 3}', "--model", "openai:bisect", "--base-url", base_url,
            "--episodes", str(episodes), "--concurrency", str(concurrency), "--output", str(output), "--no-progress"]


def wait_for_lines(path, n, proc, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if path.exists() and path.read_text().count("\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {n} episodes written in {timeout} s")


def test_gem_eval_prints_the_table_and_writes_the_reports(count_registry, tmp_path, capsys):
    with ScriptedServer() as server:
        assert gem_main(["eval", "test:Count-v0", "--model", server.base_url, "--episodes", "6",
                         "--output", str(tmp_path / "out"), "--system-prompt", "Be brief."]) == 0
    out, err = capsys.readouterr()
    assert "| test:Count-v0 | 6 | 1.000 |" in out and "6 episodes run, 0 resumed" in out
    assert "test:Count-v0 [" in err and "success 1.000" in err  # the progress line
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"episodes.jsonl", "summary.md", "summary.json"}
    first = json.loads((tmp_path / "out" / "episodes.jsonl").read_text().splitlines()[0])
    assert first["messages"][0] == {"role": "system", "content": "Be brief."}


def test_gem_eval_help_and_bad_arguments(count_registry, capsys):
    with pytest.raises(SystemExit) as exc:
        gem_main(["eval", "--help"])
    assert exc.value.code == 0 and "--samples" in capsys.readouterr().out
    assert gem_main(["eval", "test:Cuont-v0", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1"]) == 1
    assert "Did you mean 'test:Count-v0'" in capsys.readouterr().err
    assert gem_main(["eval", "test:Count-v0", "--model", "gpt-4o"]) == 1
    assert "openai:NAME" in capsys.readouterr().err


def test_eval_help_shows_each_default_once_and_explains_sampling():
    text = build_parser().format_help()
    options = re.split(r"\n  (?=-)", text)
    for option in options:
        assert " ".join(option.split()).count("default") <= 1, option
    for flag in ("--temperature", "--top-p"):
        (chunk,) = [o for o in options if o.startswith(flag)]
        assert len(" ".join(chunk.split())) > len(flag) * 2 + 20, chunk  # it has a help text


def test_a_killed_run_resumes_without_redoing_finished_episodes(count_registry, tmp_path):
    # an uninterrupted run gives the reference scores and each episode's number of requests
    with ScriptedServer() as fast:
        reference = evaluate(EvalConfig(["test:Count-v0"], model="openai:bisect", base_url=fast.base_url,
                                        episodes=EPISODES, env_kwargs={"max_turns": 3}, progress=False,
                                        output=tmp_path / "reference"))
    turns = {k: r["turns"] for k, r in EpisodeStore(reference.output / "episodes.jsonl").load().items()}

    out = tmp_path / "killed"
    jsonl = out / "episodes.jsonl"
    with ScriptedServer(delay=0.15) as server:
        proc = subprocess.Popen([*GEM, *eval_args(server.base_url, out)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_for_lines(jsonl, 4, proc)
        finally:
            proc.kill()
            proc.communicate()
        time.sleep(0.3)  # requests already sent reach the server's counter
        asked_before = server.requests
        finished = set(EpisodeStore(jsonl).load())
        assert 4 <= len(finished) < EPISODES

        done = subprocess.run([*GEM, *eval_args(server.base_url, out)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert f"{EPISODES - len(finished)} episodes run, {len(finished)} resumed" in done.stdout
        # the second run asked only for the turns of the episodes that had not finished
        assert server.requests - asked_before == sum(n for k, n in turns.items() if k not in finished)

    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    keys = [EpisodeKey.of(r) for r in lines]
    assert len(keys) == len(set(keys)) == EPISODES  # every episode exactly once
    resumed = json.loads((out / "summary.json").read_text())
    uninterrupted = json.loads((reference.output / "summary.json").read_text())
    assert resumed["envs"] == uninterrupted["envs"]


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path):
    with ScriptedServer(delay=0.15) as server:
        # a run of about a minute, so the interrupt lands mid-run however long a loaded machine keeps this process
        # from noticing the first finished episode
        args = eval_args(server.base_url, tmp_path / "out", episodes=256)
        # a terminal's Ctrl-C: SIGINT at its default in the child even when this test runs in the background
        # (`cmd &` starts jobs with SIGINT ignored, and Python then installs no KeyboardInterrupt handler)
        proc = subprocess.Popen([*GEM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        wait_for_lines(tmp_path / "out" / "episodes.jsonl", 1, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Run the same command again to resume" in err
