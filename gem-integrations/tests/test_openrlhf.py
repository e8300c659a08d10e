"""The OpenRLHF adapter, run by OpenRLHF's own ``MultiTurnAgentExecutor.execute``.

In training, OpenRLHF calls ``execute`` inside its vLLM Ray actors on GPUs; here the
engine is a stand-in with vLLM's ``generate(prompt_token_ids, sampling_params)`` shape
that plays scripted guesses in tokens (OpenRLHF installs with ``--no-deps`` on CPU:
deepspeed and flash-attn need CUDA). Runs in ``nox -s "integration(framework='openrlhf')"``.
"""

from __future__ import annotations

import asyncio
import importlib.util
from types import SimpleNamespace

import pytest

pytest.importorskip("openrlhf")

from adapter_kit import ENV_ID, assert_missing_framework_is_one_line, secret_of
from openrlhf.utils.agent import AgentExecutorBase

import gem
from gem.core import Wrapper
from gem_integrations.openrlhf import seed_of

LOGPROB = -0.5


class ScriptedEngine:
    """vLLM's ``generate`` shape: token ids in, a request output with token ids, text and logprobs out."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies = tokenizer, replies

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        turn = self.tokenizer.decode(prompt_token_ids).count("<|im_start|>assistant") - 1
        text = self.replies[turn]
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        logprobs = [{t: SimpleNamespace(logprob=LOGPROB)} for t in ids]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop",
                                                        logprobs=logprobs)])


def load_agent_file(tmp_path):
    """Load an --train.agent_func_path file the way OpenRLHF's vllm_engine does."""
    path = tmp_path / "agent_func.py"
    path.write_text("from gem_integrations.openrlhf import agent_executor\n"
                    f"AgentExecutor = agent_executor({ENV_ID!r})\n")
    spec = importlib.util.spec_from_file_location("agent_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AgentExecutorBase)
    return module.AgentExecutor()


def play(executor, tokenizer, replies, label="3"):
    engine = ScriptedEngine(tokenizer, replies)
    params = SimpleNamespace(max_tokens=None, logprobs=1)
    return asyncio.run(executor.execute("the dataset prompt is replaced", label, params, 1024, tokenizer, engine))


def test_multi_turn_episode_rewards_and_masks(tmp_path, tiny_tokenizer):
    secret = secret_of(ENV_ID, 3)
    wrong = 1 if secret != 1 else 2
    replies = [f"\\boxed{{{wrong}}}", f"\\boxed{{{secret}}}"]
    out = play(load_agent_file(tmp_path), tiny_tokenizer, replies)

    assert out["reward"] == 1.0 and float(out["scores"]) == 1.0
    assert float(out["extra_logs"]["env_success"]) == 1.0 and float(out["extra_logs"]["env_turns"]) == 2.0
    tokens, ranges = out["observation_tokens"], out["action_ranges"]
    assert [tiny_tokenizer.decode(tokens[a:b], skip_special_tokens=True) for a, b in ranges] == replies
    # the whole sequence is exactly the chat template's rendering of the conversation
    import gem

    env = gem.make(ENV_ID)
    obs0, _ = env.reset(seed=3)
    obs1 = env.step(replies[0])[0]
    conversation = [{"role": "user", "content": obs0}, {"role": "assistant", "content": replies[0]},
                    {"role": "user", "content": obs1}, {"role": "assistant", "content": replies[1]}]
    expected = tiny_tokenizer.apply_chat_template(conversation, tokenize=False)
    assert tiny_tokenizer.decode(tokens) == expected.rstrip("\n")
    # only sampled tokens carry the sampler's logprobs; the env's text is outside every action range
    in_action = {i for a, b in ranges for i in range(a, b)}
    assert all((lp == LOGPROB) == (i in in_action) for i, lp in enumerate(out["rollout_log_probs"]))
    between = tiny_tokenizer.decode(tokens[ranges[0][1]:ranges[1][0]])
    assert obs1 in between


def test_junk_reply_is_a_format_error(tmp_path, tiny_tokenizer):
    out = play(load_agent_file(tmp_path), tiny_tokenizer, ["I will not guess"])
    assert out["reward"] == pytest.approx(-0.1) and len(out["action_ranges"]) == 1


def test_labels_carry_seeds():
    assert seed_of("7") == 7 and seed_of(7) == 7 and seed_of("") is None and seed_of(None) is None
    with pytest.raises(ValueError, match="episode seed"):
        seed_of("not a seed")


def test_missing_framework_error_is_one_line_naming_the_readme_install():
    assert_missing_framework_is_one_line("openrlhf", "openrlhf")


class TurnBonus(Wrapper):
    """GuessTheNumber with 0.1 * turn added to each step's reward, so each turn has a reward of its own."""

    def reset(self, seed=None, **kwargs):
        self.turn = 0
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.turn += 1
        return obs, reward + 0.1 * self.turn, terminated, truncated, info


def test_three_turn_episode_gives_openrlhf_each_steps_reward_and_the_exact_tokens(tiny_tokenizer, monkeypatch):
    """Each step hands OpenRLHF that turn's own reward (0.1, 0.2, 1.3 here); OpenRLHF 0.11.2's
    MultiTurnAgentExecutor adds them into the sample's one reward (what examples/openrlhf/README.md
    says: no per-turn credit there). The action ranges hold the sampler's exact tokens and logprobs.
    The env is a factory function: agent_executor once stored it as a class attribute that bound
    as a method, so building the env failed (TypeError)."""
    from gem_integrations.openrlhf import GemAgentInstance, agent_executor

    seen, step = [], GemAgentInstance.step

    async def recording_step(self, states, **kwargs):
        out = await step(self, states, **kwargs)
        seen.append(float(out["rewards"]))
        return out

    monkeypatch.setattr(GemAgentInstance, "step", recording_step)
    secret = secret_of(ENV_ID, 3)
    replies = [*(f"\\boxed{{{g}}}" for g in [g for g in range(1, 11) if g != secret][:2]), f"\\boxed{{{secret}}}"]
    executor = agent_executor(lambda: TurnBonus(gem.make(ENV_ID)))()
    out = play(executor, tiny_tokenizer, replies)

    assert seen == pytest.approx([0.1, 0.2, 1.3])
    assert out["reward"] == pytest.approx(1.6)  # summed by OpenRLHF
    tokens, ranges = out["observation_tokens"], out["action_ranges"]
    assert len(ranges) == 3
    for (a, b), reply in zip(ranges, replies, strict=True):
        assert tokens[a:b] == [*tiny_tokenizer.encode(reply, add_special_tokens=False), tiny_tokenizer.eos_token_id]
        assert out["rollout_log_probs"][a:b] == [LOGPROB] * (b - a)


@pytest.mark.parametrize("fault", ["raise", "hang", "die"])
def test_a_failing_env_ends_only_its_episode_and_openrlhfs_batch_goes_on(tiny_tokenizer, fault):
    """Under OpenRLHF's own execute, a GEM env that raises, hangs past the step timeout, or whose worker
    process dies ends that sample's episode (reward 0, extra_logs env_failure 1); a sample run at the
    same time plays on with GEM's rewards."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS

    from gem.factory import EnvFactory
    from gem.testing.envs import FaultyEnv
    from gem_integrations.openrlhf import agent_executor

    action, host, _ = FAULTS[fault]
    make = EnvFactory("test:Faulty-v0", entry_point="gem.testing.envs:FaultyEnv")  # known in a fresh worker
    executor = agent_executor(make, env_host=host, step_timeout=FAULT_STEP_TIMEOUT)()
    params = SimpleNamespace(max_tokens=None, logprobs=1)

    async def batch():
        return await asyncio.gather(*(executor.execute("replaced", "2", params, 1024, tiny_tokenizer,
                                                       ScriptedEngine(tiny_tokenizer, replies))
                                      for replies in ([action], ["\\boxed{5}"] * 8)))

    failed, played = asyncio.run(batch())
    assert failed["reward"] == 0.0 and float(failed["extra_logs"]["env_failure"]) == 1.0
    twin, total, done = FaultyEnv(), 0.0, False
    twin.reset(seed=2)
    while not done:
        _, reward, terminated, truncated, _ = twin.step("\\boxed{5}")
        total, done = total + reward, terminated or truncated
    assert float(played["extra_logs"]["env_failure"]) == 0.0 and float(played["scores"]) == pytest.approx(total)
