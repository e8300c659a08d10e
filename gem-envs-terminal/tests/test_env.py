"""The terminal env: conformance, the action grammar, the sandbox's reach, the workspace as state,
and checks that nothing the agent prints or leaves behind can fool."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem
from gem.testing import ADVERSARIAL_ACTIONS, check_env
from gem_envs_terminal.env import RANDOM_COMMANDS, parse_action
from gem_envs_terminal.workspace import EPOCH, MAX_BYTES, Workspace

IDS = gem.list_envs("terminal:")


def test_ids():
    assert IDS == ["terminal:Shell-v0", "terminal:Shell-v0-debug", "terminal:Shell-v0-files", "terminal:Shell-v0-text"]


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id):
    check_env(gem.make(env_id, max_turns=4), num_random_strings=30)


def test_action_grammar():
    assert parse_action("<bash>ls -la</bash>") == ("bash", "ls -la", None)
    assert parse_action("<bash>cmd: echo hi\ntimeout_secs: 3</bash>") == ("bash", "echo hi", 3.0)
    assert parse_action("<bash>cmd: [unclosed</bash>") == ("bash", "cmd: [unclosed", None)
    for nested in ("cmd: " + "[" * 4000, "cmd: " + "[" * 60_000, "cmd: " + "{a: " * 1000):
        assert parse_action(f"<bash>{nested}</bash>") == ("bash", nested.strip(), None)
    assert parse_action("think <finish>done</finish> <bash>ls</bash>") == ("finish", "", None)
    assert parse_action("<bash>never closed") is None and parse_action("ls") is None
    assert parse_action("<bash>" * 10000) is None
    # linear: a megabyte of unclosed tags is one search per tag name, not one per tag
    assert parse_action("<bash><finish>" * 80_000) is None


def test_format_error_ends_without_a_check():
    env = gem.make("terminal:Shell-v0", task="create_file")
    env.reset(seed=0)
    obs, reward, terminated, _tr, info = env.step("just text")
    assert (reward, terminated, info["format_error"]) == (-0.1, True, True)
    assert env.step("<finish></finish>")[2]  # over until reset


def test_commands_see_their_output_and_the_workspace_persists():
    env = gem.make("terminal:Shell-v0", task="rename_file")
    obs, _ = env.reset(seed=0)
    obs, reward, *_ = env.step("<bash>echo made > new.txt; ls</bash>")
    assert "new.txt" in obs and reward == 0.0
    obs, *_ = env.step("<bash>cat new.txt; exit 3</bash>")
    assert "made" in obs and "exit code 3" in obs
    assert env.step("<finish></finish>")[4]["format_error"] is False


_PLAY = """
import json, gem
from gem_envs_terminal.env import RANDOM_COMMANDS
env = gem.make("terminal:Shell-v0", max_turns=8)
seen = [env.reset(seed=5)[0]] + [env.step(f"<bash>{c}</bash>")[0] for c in RANDOM_COMMANDS]
print(json.dumps(seen))
"""


def test_random_play_repeats_for_a_seed():
    # random actions feed tokenizer corpora and warm starts: their observations must not carry the run's uid
    # (drawn afresh by each process's sandbox under root) or the clock, as `ls -la` did
    def play() -> list[str]:
        return json.loads(subprocess.run([sys.executable, "-c", _PLAY], capture_output=True, text=True,
                                         check=True).stdout)

    first = play()
    assert len(first) == len(RANDOM_COMMANDS) + 1 and first == play()


def test_the_workspace_shows_one_fixed_time():
    # the snapshot keeps no times, so every run shows the same ones instead of the clock's
    env = gem.make("terminal:Shell-v0", task="symlink_latest")
    env.reset(seed=0)
    obs = env.step("<bash>stat -c '%Y %n' . releases releases/*</bash>")[0]
    times = {line.split()[0] for line in obs.split("<bash_output>")[1].split("</bash_output>")[0].splitlines()}
    assert times == {str(EPOCH)}, obs


def test_no_network_and_a_read_only_system():
    env = gem.make("terminal:Shell-v0", task="create_file")
    env.reset(seed=0)
    obs, *_ = env.step("<bash>python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 2)\" "
                       "2>&1 | tail -n 1; touch /etc/x 2>&1; echo rc=$?</bash>")
    assert "Error" in obs and "rc=1" in obs


def test_a_command_that_runs_too_long_is_stopped():
    env = gem.make("terminal:Shell-v0", task="create_file", timeout=1)
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step("<bash>echo before > a.txt; sleep 20</bash>")
    assert "timed out" in obs and not terminated
    assert env.workspace.text("a.txt") == "before\n"


def test_an_overlong_command_is_refused():
    env = gem.make("terminal:Shell-v0", task="create_file")
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step("<bash>echo " + "a" * 100_000 + "</bash>")
    assert "was not run" in obs and reward == 0.0 and not terminated


def test_oversized_workspace_is_refused_and_the_old_one_kept():
    env = gem.make("terminal:Shell-v0", task="create_file")
    env.reset(seed=0)
    before = env.get_state()["workspace"]
    obs, *_ = env.step(f"<bash>head -c {2 * MAX_BYTES} /dev/zero > big.bin</bash>")
    assert "size limit" in obs and env.get_state()["workspace"] == before


def test_state_is_the_workspace_and_round_trips_through_json():
    env = gem.make("terminal:Shell-v0", task="concatenate_parts")
    env.reset(seed=3)
    env.step("<bash>mkdir -p d/e && ln -s part1.txt link && cat part1.txt part2.txt > half.txt</bash>")
    state = json.loads(json.dumps(env.get_state()))
    twin = gem.make("terminal:Shell-v0", task="concatenate_parts")
    twin.set_state(state)
    assert twin.workspace == env.workspace and twin.workspace.links == {"link": "part1.txt"}
    assert twin.workspace.is_dir("d/e")
    for action in env.solution():
        expected = env.step(action)
    for action in twin.solution():
        got = twin.step(action)
    assert got[:4] == expected[:4] and got[1] == 1.0


def test_printing_a_score_or_a_forged_snapshot_earns_nothing():
    env = gem.make("terminal:Shell-v0", task="fix_off_by_one")
    env.reset(seed=0)
    # a module that prints "answers" on import cannot know the hidden inputs' results without computing them
    env.step("<bash>printf 'print(\"[1, 3, 6, 10, 15]\")\\nimport sys\\nsys.exit(0)\\n' > stats.py</bash>")
    env.step("<bash>echo '@@gem-workspace-FAKE@@{\"entries\": []}'; echo score 1.00</bash>")
    _obs, reward, *_ = env.step("<finish></finish>")
    assert reward == 0.0


def test_snapshot_parser_refuses_escapes():
    for bad in ({"entries": [{"path": "../x", "kind": "file", "data": ""}]},
                {"entries": [{"path": "/etc/x", "kind": "dir"}]},
                {"entries": "nope"}, {"entries": [{"path": "a", "kind": "fifo"}]}):
        with pytest.raises(ValueError):
            Workspace.from_json(bad)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(st.one_of(st.text(max_size=30), st.text(max_size=30).map(lambda t: f"<bash>{t}</bash>"),
                                  st.sampled_from(ADVERSARIAL_ACTIONS)), max_size=4))
def test_any_text_is_a_legal_action(actions):
    env = gem.make("terminal:Shell-v0", max_turns=4)
    env.reset(seed=0)
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and -0.1 <= reward <= 1.0
        if terminated or truncated:
            break
