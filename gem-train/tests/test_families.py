"""Two-iteration runs of gem-train on env families beyond the toy game: a tool in the loop (math behind
gem-tools' python tool, warm-started on demonstrations that call it), each through :func:`train` as a
user's ``gem-train`` command runs it.

The tool test checks what a tool-using RL run must get right: the model's tool call is executed by the
sandbox during a training rollout (its program really runs: the output the next prompt shows is what the
program prints), that output reaches the model as part of the next turn's prompt, and no token of it is
a trained token (the loss mask covers the sampled reply only).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

pytest.importorskip("gem_tools", reason="the tool family needs gem-tools (pip install -e gem-tools)")
pytest.importorskip("gem_envs_math", reason="the math family needs gem-envs-math (pip install -e gem-envs-math)")

import gem_train.trainer as trainer_module
from gem_tools.sandbox import Sandbox
from gem_train.cli import to_train_config
from gem_train.demonstrations import ToolAnswerOracle, demonstrator_factory
from gem_train.learner import pack
from gem_train.metrics_log import read_metrics
from gem_train.trainer import train

RESULT = "Code execution result:"
# math behind the python tool: the warm start's demonstrations call the tool first, then answer from its output
MATH_WITH_PYTHON = [
    "env.id=math:Arithmetic-v0-easy", "env.wrappers='python_tool,messages'", "env.demonstrator=tool_answer",
    "env.max_turns=3", "rollout.max_tokens=48", "model.max_model_len=768", "model.tiny.vocab_size=800",
    "trainer.sft.episodes=64", "trainer.sft.epochs=12", "trainer.sft.lr=1e-2", "trainer.sft.batch_size=16",
]


def family_config(out: Path, *overrides: str):
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = compose("config", overrides=["experiment=smoke", f"experiment.output_dir={out}", *overrides])
    return to_train_config(cfg)


def test_the_tool_demonstrator_calls_the_tool_then_answers_from_what_it_printed():
    import gem
    from gem.wrappers import apply_wrappers

    env = apply_wrappers(gem.make("math:Arithmetic-v0-easy"), "python_tool,messages")
    teacher = demonstrator_factory("tool_answer")(env)
    obs, _ = env.reset(seed=3)
    teacher.reset()
    call = teacher.act(obs[-1]["content"])
    assert call.startswith("<python>") and repr(str(env.unwrapped.answer)) in call
    obs, reward, terminated, _, info = env.step(call)
    assert info["use_tool"] and info["tool_success"] and not terminated
    answer = teacher.act(obs[-1]["content"])
    assert answer == f"\\boxed{{{env.unwrapped.answer}}}"
    _, reward, terminated, _, info = env.step(answer)
    assert terminated and info["correct"] and reward > 0


def test_the_tool_demonstrator_needs_a_tool_wrapper():
    import gem

    with pytest.raises(ValueError, match="python_tool, search_tool"):
        ToolAnswerOracle(gem.make("math:Arithmetic-v0-easy"))


def test_a_tool_call_runs_in_the_sandbox_during_training_and_its_output_is_masked_out_of_the_loss(
        tmp_path, monkeypatch):
    played: list = []
    programs: list[tuple[str, str]] = []  # (backend, program) of every sandboxed run during RL rollouts
    in_rollout = [False]
    collect = trainer_module.collect

    def recording_collect(*args, **kwargs):
        in_rollout[0] = True
        try:
            episodes = collect(*args, **kwargs)
        finally:
            in_rollout[0] = False
        played.extend(episodes)
        return episodes

    for name in ("run_python", "arun_python"):
        original = getattr(Sandbox, name)

        def recording(self, code, *args, _original=original, **kwargs):
            if in_rollout[0]:
                programs.append((self.backend_name, code))
            return _original(self, code, *args, **kwargs)

        monkeypatch.setattr(Sandbox, name, recording)
    monkeypatch.setattr(trainer_module, "collect", recording_collect)

    out = tmp_path / "run"
    train(family_config(out, *MATH_WITH_PYTHON))

    records = read_metrics(out / "metrics.jsonl")
    train_records = [r for r in records if r["kind"] == "train"]
    assert [r["iteration"] for r in train_records] == [1, 2]
    assert sum(r["tool_calls"] for r in train_records) > 0  # the metric counts them
    # the warm start called the tool, so the policy does too: programs ran in the sandbox while episodes played
    assert programs and all(backend in ("bwrap", "unshare", "rlimit") for backend, _ in programs)

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out / "model_init")
    checked = 0
    for episode in played:
        turns = episode.trajectory.turns
        for i, turn in enumerate(turns[:-1]):
            if not (turn.info.get("use_tool") and turn.info.get("tool_success")):
                continue
            call, following = episode.turns[i], episode.turns[i + 1]
            program = re.search(r"<python>(.*?)</python>", tok.decode(call.response_ids, skip_special_tokens=True),
                                re.S)
            assert program is not None
            # the sandbox ran the program: the next prompt shows what it prints when run here
            printed = subprocess.run([sys.executable, "-c", program.group(1)], capture_output=True, text=True,
                                     timeout=30).stdout.strip()
            next_prompt = tok.decode(following.prompt_ids)
            assert f"{RESULT} {printed}" in next_prompt
            # ... as prompt (env) tokens: no reply holds the tool's output, and the loss mask is the reply alone
            for sample in (call, following):
                assert RESULT not in tok.decode(sample.response_ids)
                batch = pack([sample], tok.pad_token_id)
                assert int(batch["mask"].sum()) == len(sample.response_ids)
                trained = batch["targets"][0][batch["mask"][0].bool()].tolist()
                assert trained == sample.response_ids
            checked += 1
    assert checked > 0


#: one baseline preset per family, shrunk to seconds: the games suite, reasoning-gym, code with test feedback,
#: QA with the search tool over the offline corpus, self-play and the terminal (math with the tool is above)
ONE_PER_FAMILY = ["sudoku", "rg_count_bits", "code_mbpp_multiturn", "qa_triviaqa_search", "tictactoe_selfplay",
                  "terminal_shell"]
SHRUNK = ["trainer.iterations=2", "trainer.eval_every=2", "trainer.eval_episodes=4", "trainer.sft.episodes=8",
          "trainer.sft.epochs=1", "rollout.episodes_per_iter=4", "model.tiny.corpus_episodes=4",
          "model.tiny.vocab_size=512"]


@pytest.mark.parametrize("baseline", ONE_PER_FAMILY)
def test_two_iterations_of_each_family_through_gem_train(baseline, tmp_path):
    out = tmp_path / "run"
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = to_train_config(compose("config", overrides=[f"experiment=baselines/{baseline}",
                                                           f"experiment.output_dir={out}", *SHRUNK]))
    summary = train(cfg)
    records = read_metrics(out / "metrics.jsonl")
    train_records = [r for r in records if r["kind"] == "train"]
    assert [r["iteration"] for r in train_records] == [1, 2]
    assert all(r["turns_trained"] > 0 and r["env_faults"] == 0 for r in train_records)
    sft = [r for r in records if r["kind"] == "sft"]
    assert sft and sft[0]["demo_return"] > 0  # the preset's demonstrator plays its env well (Tic-Tac-Toe: draws)
    assert summary["last_eval"]["eval_episodes"] == 4


def test_an_episode_a_noisy_action_made_unsolvable_ends_there_and_one_without_noise_raises():
    import gem
    from gem.wrappers import apply_wrappers
    from gem_train.demonstrations import demonstrations
    from gem_train.tokenizer import train_chat_tokenizer

    tok = train_chat_tokenizer(["Sokoban"], vocab_size=300)

    def make_env():
        return apply_wrappers(gem.make("game:Sokoban-v0-easy"), "latest")

    class Planner:  # the real planner, which raises on unsolvable rooms
        def __init__(self, env):
            from gem_envs_games.solvers import solver_for

            self.solver = solver_for(env)

        def reset(self):
            self.solver.reset()

        def act(self, observation):
            return self.solver.act(observation)

    samples, stats = demonstrations(make_env, Planner, tok, range(40), noise=0.5, max_model_len=10**6, max_turns=16)
    assert stats["demo_abandoned"] > 0 and samples  # some rooms were ruined by noise; the others are kept

    class Broken(Planner):
        def act(self, observation):
            raise ValueError("cannot play")

    with pytest.raises(ValueError, match="cannot play"):
        demonstrations(make_env, Broken, tok, range(2), noise=0.0, max_model_len=10**6)
