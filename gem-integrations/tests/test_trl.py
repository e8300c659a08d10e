"""The TRL adapter in TRL's real ``GRPOTrainer``: a few GRPO steps on CPU with gem-train's
tiny local Qwen2 (built here, nothing downloaded) on GuessTheNumber, through both hooks.

The tiny model is untrained; ``action_bias`` (a ``sequence_bias`` passed through
``GRPOConfig.generation_kwargs``, a standard ``transformers`` generation option) makes it
answer in the game's format so that episodes last several turns and env text is
spliced in. Runs in ``nox -s "integration(framework='trl')"``.
"""

from __future__ import annotations

import copy
import os
import statistics

import pytest

pytest.importorskip("trl")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from adapter_kit import ENV_ID, assert_missing_framework_is_one_line, secret_of
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from gem_integrations.trl import (
    GemRollout,
    action_bias,
    env_reward,
    gem_dataset,
    tool_call_text,
    tool_chat_template,
    tool_environment,
)

FEEDBACK_WORDS = ("higher", "lower", "already", "outside", "range")


def grpo_config(tmp_path, tokenizer=None, **overrides):
    kwargs = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                  max_completion_length=64, max_steps=3, logging_steps=1, report_to="none", use_cpu=True,
                  save_strategy="no", learning_rate=1e-3, beta=0.0, seed=0, dataloader_num_workers=0,
                  gradient_checkpointing=False)
    if tokenizer is not None:
        kwargs["generation_kwargs"] = {"sequence_bias": action_bias(ENV_ID, tokenizer)}
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)


def test_rollout_func_trains_on_env_rewards_with_env_tokens_masked(tmp_path, tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rollout = GemRollout(ENV_ID)
    calls = []

    def recording_rollout(prompts, trainer):
        out = rollout(prompts, trainer)
        calls.append(copy.deepcopy(out))
        return out

    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=env_reward, args=grpo_config(tmp_path, tok),
                          train_dataset=gem_dataset(ENV_ID, seeds=range(8)), processing_class=tok,
                          rollout_func=recording_rollout)
    trainer.train()

    logs = [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert len(logs) == len(calls) == 3
    for log, call in zip(logs, calls, strict=True):
        # the env's returns are the rewards GRPO saw
        assert log["rewards/env_reward/mean"] == pytest.approx(statistics.mean(call["env_return"]), abs=1e-5)
        # TRL counted only the model's tokens (env_mask == 1) as completion tokens
        model_tokens = [sum(mask) for mask in call["env_mask"]]
        assert log["completions/mean_length"] == pytest.approx(statistics.mean(model_tokens), abs=1e-5)
        # one GRPO group per step: its four rollouts started from the same seed
        assert len(set(call["env_seed"])) == 1
        for ids, mask in zip(call["completion_ids"], call["env_mask"], strict=True):
            assert len(ids) == len(mask) <= 64
            env_text = tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 0]).lower()
            if env_text:
                assert "<|im_start|>user" in env_text and any(w in env_text for w in FEEDBACK_WORDS)
    turns = [t for call in calls for t in call["env_turns"]]
    assert max(turns) > 1, "the biased tiny model should play several turns"
    assert any(0 in mask for call in calls for mask in call["env_mask"])


def test_environment_factory_trains_with_the_env_reward(tmp_path, tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = tool_chat_template("qwen3")

    # a tool call is about 70 tokens of the tiny byte-level tokenizer
    config = grpo_config(tmp_path, max_steps=2, max_completion_length=160, max_tool_calling_iterations=2,
                         generation_kwargs={"sequence_bias": action_bias(ENV_ID, tok, wrap=tool_call_text)})
    trainer = GRPOTrainer(model=str(tiny_model_dir), args=config,
                          train_dataset=gem_dataset(ENV_ID, seeds=range(8), for_tools=True), processing_class=tok,
                          environment_factory=tool_environment(ENV_ID))
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/GemToolEnv/mean" in h]
    assert len(logs) == 2
    # the biased model calls the tool, so the env's rewards come from moves it made
    assert all(h["tools/call_frequency"] > 0 for h in logs)
    assert all(-0.1 - 1e-6 <= h["rewards/GemToolEnv/mean"] <= 1.0 for h in logs)


def test_tool_env_plays_and_scores_an_episode():
    env = tool_environment(ENV_ID)()
    secret = secret_of(ENV_ID, 3)
    wrong = 1 if secret != 1 else 2
    assert "between" in env.reset(prompt=[], seed=3)
    assert any(w in env.act(f"\\boxed{{{wrong}}}").lower() for w in FEEDBACK_WORDS)
    assert env.act(f"\\boxed{{{secret}}}").endswith("The game is over.")
    assert env.act("\\boxed{1}").startswith("The game is over") and env.get_reward() == 1.0
    env.reset(seed=4)
    assert env.get_reward() == pytest.approx(-0.1)  # never moved: the empty move is a format error


def test_rollout_needs_seeded_prompts(tmp_path):
    with pytest.raises(ValueError, match="gem_dataset"):
        GemRollout(ENV_ID)([[{"role": "user", "content": "no seed"}]], trainer=None)


def test_missing_framework_error_is_one_line_naming_the_readme_install():
    assert_missing_framework_is_one_line("trl", "trl")


def load_example():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "trl" / "train_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_tool_hook_budget_holds_a_whole_game(tmp_path):
    # a whole game's calls, the tool's answers and the turns' ends fit the example's default budget
    import gem
    from gem_train.model import build_tiny_model

    example = load_example()
    tok = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path, lambda: gem.make(ENV_ID),
                                                         extra_texts=example.tool_texts(ENV_ID)))
    tok.chat_template = tool_chat_template("qwen3")
    env = gem.make(ENV_ID)
    turns = []
    for guess in range(1, 11):
        move = f"\\boxed{{{guess}}}"
        env.reset(seed=0)
        call = {"type": "function", "function": {"name": "act", "arguments": {"action": move}}}
        before = [{"role": "user", "content": "Play"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
        after = [*before, {"role": "tool", "name": "act", "content": str(env.step(move)[0])}]
        answer = tok.apply_chat_template(after, tokenize=False, add_generation_prompt=True)[
            len(tok.apply_chat_template(before, tokenize=False)):]
        call_tokens = len(tok(tool_call_text(move), add_special_tokens=False)["input_ids"]) + 1  # + eos
        turns.append(call_tokens + len(tok(answer, add_special_tokens=False)["input_ids"]))
    assert env.unwrapped.max_turns * max(turns) <= example.BUDGET["tools"]


@pytest.mark.parametrize("fault", ["raise", "hang", "die"])
def test_a_failing_env_ends_only_its_episodes_and_grpo_trains_on(tmp_path, tiny_model_dir, gem_plugins_catalog,
                                                                 fault):
    """In TRL's real GRPOTrainer, the episodes of a GEM env that raises, hangs past the step timeout, or
    whose worker process dies end there (their return the env's failure reward, env_failure naming the
    cause); the other group of the step plays its episodes and training goes on."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS, failing_seed_env

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    env = failing_seed_env(fault, failing_seed=0)
    rollout = GemRollout(env, env_host=FAULTS[fault][1], step_timeout=FAULT_STEP_TIMEOUT)
    calls = []

    def recording_rollout(prompts, trainer):
        calls.append(copy.deepcopy(rollout(prompts, trainer)))
        return calls[-1]

    config = grpo_config(tmp_path, max_steps=1, per_device_train_batch_size=8, max_completion_length=32)
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=env_reward, args=config,
                          train_dataset=gem_dataset(env, seeds=[0, 1]), processing_class=tok,
                          rollout_func=recording_rollout)
    trainer.train()
    (call,) = calls
    assert sorted(call["env_seed"]) == [0] * 4 + [1] * 4  # both groups in the step
    for seed, failure, total, turns in zip(call["env_seed"], call["env_failure"], call["env_return"],
                                           call["env_turns"], strict=True):
        if seed == 0:
            assert (failure, total, turns) == (FAULTS[fault][2], 0.0, 1)
        else:
            assert failure == ""
    assert [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
