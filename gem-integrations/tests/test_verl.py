"""The verl adapter, built and run the way verl's ``AgentLoopWorker`` does it: looked up in
verl's agent-loop registry as ``gem_agent``, instantiated with ``hydra.utils.instantiate``
and the worker's arguments, and run against a server manager.

In training the server manager fronts vLLM/SGLang servers on GPUs; here it is a stand-in
returning verl's own ``TokenOutput`` with scripted guesses (as verl's CPU tests of agent
loops do). Runs in ``nox -s "integration(framework='verl')"``.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")

import hydra
from adapter_kit import ENV_ID, assert_missing_framework_is_one_line, secret_of
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from gem_integrations.verl import AGENT_NAME, gem_rows

LOGPROB = -0.5


class ScriptedServerManager:
    """``generate(request_id, prompt_ids, sampling_params)`` returning verl's TokenOutput."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies = tokenizer, replies
        self.request_ids: list[str] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.request_ids.append(request_id)
        turn = self.tokenizer.decode(prompt_ids).count("<|im_start|>assistant") - 1
        ids = [*self.tokenizer.encode(self.replies[turn], add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[LOGPROB] * len(ids), stop_reason="completed")


def make_loop(tokenizer, server_manager, response_length=256):
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": response_length}},
        "data": {},
    })
    return hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_NAME], trainer_config=DictConfigWrap(config=config),
        server_manager=server_manager, tokenizer=tokenizer, processor=None, hf_model_type=None,
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))


def run_row(tokenizer, server_manager, row, **kwargs):
    """Build the loop inside the running event loop (verl's worker does; the loop keeps it) and run one row."""

    async def main():
        return await make_loop(tokenizer, server_manager, **kwargs).run({"temperature": 1.0}, **row)

    return asyncio.run(main())


def test_registered_loop_plays_an_episode_with_masks_and_reward(tiny_tokenizer):
    secret = secret_of(ENV_ID, 3)
    wrong = 1 if secret != 1 else 2
    replies = [f"\\boxed{{{wrong}}}", f"\\boxed{{{secret}}}"]
    server = ScriptedServerManager(tiny_tokenizer, replies)
    out = run_row(tiny_tokenizer, server, gem_rows(ENV_ID, [3])[0])

    assert out.reward_score == 1.0 and out.extra_fields["env_success"] is True and out.num_turns == 5
    assert len(set(server.request_ids)) == 1  # one request id per episode
    ids, mask = out.response_ids, out.response_mask
    sampled = [t for t, m in zip(ids, mask, strict=True) if m == 1]
    eos = tiny_tokenizer.eos_token_id
    expected = [t for r in replies for t in [*tiny_tokenizer.encode(r, add_special_tokens=False), eos]]
    assert sampled == expected
    assert [lp for lp, m in zip(out.response_logprobs, mask, strict=True) if m == 1] == [LOGPROB] * len(expected)
    env_text = tiny_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
    assert "higher" in env_text.lower() or "lower" in env_text.lower()
    assert "between" in tiny_tokenizer.decode(out.prompt_ids)
    # verl turns the output into tensors with the reward on the last response token
    tensors = out.as_dict()
    assert float(tensors["rm_scores"][-1]) == 1.0 and float(tensors["rm_scores"][:-1].abs().sum()) == 0.0


def test_response_budget_ends_the_episode(tiny_tokenizer):
    server = ScriptedServerManager(tiny_tokenizer, ["\\boxed{1}"] * 30)
    out = run_row(tiny_tokenizer, server, gem_rows(ENV_ID, [0])[0], response_length=12)
    assert len(out.response_ids) <= 12 and len(out.response_mask) == len(out.response_ids)


def test_row_without_env_is_a_clear_error(tiny_tokenizer):
    with pytest.raises(ValueError, match="extra_info"):
        run_row(tiny_tokenizer, ScriptedServerManager(tiny_tokenizer, []), {"raw_prompt": [], "extra_info": {}})


def test_dataset_rows_reach_the_loop_through_verls_dataset(tmp_path, tiny_tokenizer):
    """gem_rows written to parquet and read back by verl's RLHFDataset give the loop its env and seed."""
    import pandas as pd

    pd.DataFrame(gem_rows(ENV_ID, [5, 6])).to_parquet(tmp_path / "train.parquet")
    config = OmegaConf.create({"max_prompt_length": 512, "return_raw_chat": True, "prompt_key": "prompt"})
    row = RLHFDataset(data_files=[str(tmp_path / "train.parquet")], tokenizer=tiny_tokenizer, config=config)[0]
    assert row["agent_name"] == AGENT_NAME and row["extra_info"]["seed"] == 5
    secret = secret_of(ENV_ID, 5)
    server = ScriptedServerManager(tiny_tokenizer, [f"\\boxed{{{secret}}}"])
    fields = {k: v for k, v in row.items() if k != "dummy_tensor"}
    assert run_row(tiny_tokenizer, server, fields).reward_score == 1.0


def test_missing_framework_error_is_one_line_naming_the_readme_install():
    assert_missing_framework_is_one_line("verl", "verl")
