"""The SkyRL adapter against the real skyrl-gym: GEM episodes built with ``skyrl_gym.make``
from dataset rows and played through ``init``/``step`` the way skyrl-train's generator does.

skyrl-gym ships no loop of its own that drives an env; the loop that does is
``SkyRLGymGenerator.agent_loop`` in skyrl-train 0.3.1. :func:`generator_episode` makes the
calls that ``agent_loop`` makes, in its order, on rows split into prompt / env_class / extras
as skyrl-train's ``PromptDataset`` splits them, so these tests need skyrl-gym only.
Runs in ``nox -s "integration(framework='skyrl')"``.

``test_one_generation_round_through_skyrl_trains_generator`` also runs one round of skyrl-train's
real ``SkyRLGymGenerator.generate`` with a stand-in engine (the solver) and gem-train's tiny
tokenizer. skyrl-train declares Python ==3.12.*; the nox session installs it on 3.11 with
``pip install --no-deps --ignore-requires-python skyrl-train==0.3.1`` beside the modules it
imports (examples/skyrl/README.md's check block), transformers 4: under transformers 5
skyrl-train 0.3.1's generator fails (``apply_chat_template`` returns a ``BatchEncoding`` where it
expects a list of ids). Where skyrl-train is absent that test is skipped.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

pytest.importorskip("skyrl_gym")

import skyrl_gym
from adapter_kit import ENV_ID, assert_missing_framework_is_one_line, secret_of
from omegaconf import DictConfig

import gem
from gem_envs_games.solvers import solver_for
from gem_integrations.skyrl import ENV_CLASS, GemSkyRLEnv, gem_rows, register_env

WIN_REWARD = 1.0


def dataset_rows(tmp_path, rows):
    """Rows after a JSON-lines round trip, split as PromptDataset.__getitem__ does."""
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        prompt, env_class = row.pop("prompt"), row.pop("env_class", None)
        out.append((prompt, env_class, row))
    return out


def generator_episode(prompt, env_class, extras, policy, max_turns=8):
    """One trajectory, with the env calls SkyRLGymGenerator.agent_loop makes: extras gain
    max_turns, make(env_class, env_config=..., extras=...), init(prompt), step(reply) until
    done, get_metrics(), close(). ``policy(chat, env)`` stands in for the inference engine."""
    extras = dict(extras)
    extras["max_turns"] = max_turns
    env = skyrl_gym.make(env_class, env_config=DictConfig({}), extras=extras)
    chat, _ = env.init(list(prompt))
    steps, replies, done = [], [], False
    while not done:
        replies.append(policy(chat, env))
        out = env.step(replies[-1])
        steps.append(out)
        chat = chat + out["observations"]
        done = out["done"]
    metrics = env.get_metrics()
    env.close()
    return chat, steps, metrics, replies


def solver_policy():
    """gem-envs-games' solver reading the chat's last user message (the env's observation)."""
    state = {}

    def act(chat, env):
        if state.get("env") is not env:
            state["env"], state["solver"] = env, solver_for(env.gem_env)
            state["solver"].reset()
        return state["solver"].act(chat[-1]["content"])

    return act


def test_registered_as_gem_and_made_from_a_dataset_row():
    assert ENV_CLASS == "gem" and "gem" in skyrl_gym.registry
    env = skyrl_gym.make("gem", env_config=DictConfig({}), extras={"env_id": ENV_ID, "seed": 1, "max_turns": 4})
    assert isinstance(env, GemSkyRLEnv) and isinstance(env, skyrl_gym.Env)
    assert env.spec.id == "gem"
    env.close()


def test_solver_wins_through_the_generator_calls_with_the_envs_reward(tmp_path):
    seeds = range(6)
    rows = dataset_rows(tmp_path, gem_rows(ENV_ID, seeds))
    for seed, (prompt, env_class, extras) in zip(seeds, rows, strict=True):
        assert env_class == "gem" and extras == {"env_id": ENV_ID, "seed": seed}
        chat, steps, metrics, replies = generator_episode(prompt, env_class, extras, solver_policy())
        final = steps[-1]
        assert final["done"] and final["reward"] == WIN_REWARD and final["metadata"]["terminated"]
        assert final["metadata"]["info"].get("correct") is True
        assert final["observations"] == []  # the generator drops the last observation anyway
        assert all(s["reward"] == 0.0 and not s["done"] for s in steps[:-1])
        assert metrics == {"turns": len(steps), "return": WIN_REWARD, "terminated": 1.0}
        # the row's seed reached the env: the solver's last guess is the seeded secret
        assert replies[-1] == f"\\boxed{{{secret_of(ENV_ID, seed)}}}"
        # the intermediate observations are the env's hints, as user messages
        assert all(m["role"] == "user" for m in chat) and any("higher" in m["content"] or "lower" in m["content"]
                                                               for m in chat[1:]) == (len(steps) > 1)


def test_the_returns_match_the_env_played_directly(tmp_path):
    (prompt, env_class, extras), = dataset_rows(tmp_path, gem_rows(ENV_ID, [7]))
    _, steps, _, _ = generator_episode(prompt, env_class, extras, solver_policy())
    direct = gem.make(ENV_ID)
    obs, info = direct.reset(seed=7)
    solver = solver_for(direct)
    solver.reset()
    rewards, done = [], False
    while not done:
        obs, reward, terminated, truncated, info = direct.step(solver.act(obs))
        rewards.append(reward)
        done = terminated or truncated
    assert [s["reward"] for s in steps] == rewards


def test_init_uses_the_live_observation_and_keeps_the_system_prompt():
    rows = gem_rows(ENV_ID, [2], system_prompt="Be brief.")
    assert rows[0]["prompt"][0] == {"role": "system", "content": "Be brief."}
    env = skyrl_gym.make("gem", env_config={}, extras={"env_id": ENV_ID, "seed": 2})
    stale = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "stale text"}]
    chat, meta = env.init(stale)
    assert chat[0] == stale[0] and chat[1]["role"] == "user" and chat[1]["content"] == rows[0]["prompt"][1]["content"]
    assert "suffix" in meta["info"]
    env.close()


def test_generator_max_turns_ends_the_episode_as_truncated():
    env = skyrl_gym.make("gem", env_config={}, extras={"env_id": ENV_ID, "seed": 0, "max_turns": 1})
    env.init([])
    secret = secret_of(ENV_ID, 0)
    out = env.step(f"\\boxed{{{1 if secret != 1 else 2}}}")
    assert out["done"] and out["reward"] == 0.0
    assert out["metadata"]["truncated"] and not out["metadata"]["terminated"]
    assert env.step("\\boxed{3}") == {"observations": [], "reward": 0.0, "done": True, "metadata": {"info": {}}}
    env.close()


@pytest.mark.parametrize("action", ["", "x" * 100_000, "\\boxed{}", "\\boxed{99999999999999999999}", "\x00\ud7ff"])
def test_any_string_is_a_legal_action_and_never_outscores_a_win(action):
    env = skyrl_gym.make("gem", env_config={}, extras={"env_id": ENV_ID, "seed": 5, "max_turns": 4})
    env.init([])
    out = env.step(action)
    assert isinstance(out["reward"], float) and out["reward"] < WIN_REWARD
    assert isinstance(out["done"], bool)
    env.close()


def test_env_id_from_env_config_and_a_bound_env():
    env = skyrl_gym.make("gem", env_config=DictConfig({"env_id": ENV_ID}), extras={"seed": 1})
    assert env.env_id == ENV_ID
    env.close()
    register_env("gem-guess-bound", env=ENV_ID)
    register_env("gem-guess-bound", env=ENV_ID)  # a second call (another import) is a no-op
    env = skyrl_gym.make("gem-guess-bound", env_config={}, extras={"seed": 1})
    chat, _ = env.init([])
    assert chat[0]["content"].startswith("You are playing Guess the Number")
    env.close()
    skyrl_gym.envs.registration.deregister("gem-guess-bound")


def test_a_bound_env_aggregates_metrics_as_skyrl_trains_generator_does():
    """register_env(env=...) once registered a functools.partial, and the generator's rollout
    metrics (skyrl_gym.metrics.aggregate_for_environment) failed on it: a partial has no
    aggregate_metrics. A factory (here a function) must also stay unbound."""
    from skyrl_gym.metrics import aggregate_for_environment

    register_env("gem-guess-factory", env=lambda: gem.make(ENV_ID))
    try:
        env = skyrl_gym.make("gem-guess-factory", env_config={}, extras={"seed": 1, "max_turns": 1})
        env.init([])
        env.step("\\boxed{1}")
        metrics = env.get_metrics()
        env.close()
        assert aggregate_for_environment("gem-guess-factory", [metrics, metrics]) == metrics
    finally:
        skyrl_gym.envs.registration.deregister("gem-guess-factory")


def test_a_row_with_wrappers_plays_the_wrapped_env():
    """The math recipes' rows name GEM wrappers (python_tool): the env the generator builds from
    the row runs the reply's code in gem-tools' sandbox and answers with its output."""
    pytest.importorskip("gem_tools")
    row, = gem_rows(ENV_ID, [3], wrappers="python_tool")
    assert row["wrappers"] == "python_tool" and "python" in row["prompt"][-1]["content"]
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")} | {"max_turns": 4}
    env = skyrl_gym.make("gem", env_config={}, extras=extras)
    chat, _ = env.init(row["prompt"])
    assert chat[-1]["content"] == row["prompt"][-1]["content"]
    out = env.step("```python\nprint(6 * 7)\n```")
    env.close()
    assert not out["done"] and "42" in out["observations"][0]["content"]


def test_a_row_without_an_env_id_fails_in_one_line():
    with pytest.raises(ValueError, match="env_id") as err:
        skyrl_gym.make("gem", env_config={}, extras={"seed": 1})
    assert "\n" not in str(err.value)


def test_missing_skyrl_gym_is_one_line_with_the_readme_install():
    assert_missing_framework_is_one_line("skyrl", "skyrl_gym")


def test_a_changed_hook_fails_at_import_naming_the_tested_version():
    code = ("import skyrl_gym.envs.base_text_env as b\n"
            "b.BaseTextEnv.init = lambda self, prompt, seed: None\n"
            "try:\n    import gem_integrations.skyrl\nexcept ImportError as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("FrameworkVersionError skyrl-gym 0.4.0: BaseTextEnv.init(prompt)")
    assert "skyrl-gym==0.4.0" in out


class SolverEngine:
    """A stand-in for skyrl-train's ``InferenceEngineClient.generate``: per trajectory
    (session id), gem-envs-games' solver answers the last user message of the prompt."""

    def __init__(self, tokenizer):
        self.tok, self.solvers, self.calls = tokenizer, {}, 0

    async def generate(self, engine_input):
        import re

        self.calls += 1
        session = engine_input["session_ids"][0]
        text = self.tok.decode(engine_input["prompt_token_ids"][0])
        last_user = re.findall(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", text, re.S)[-1]
        if session not in self.solvers:
            env = gem.make(ENV_ID)
            env.reset(seed=0)  # the solver reads only the env's public range
            self.solvers[session] = solver_for(env)
            self.solvers[session].reset()
        reply = self.solvers[session].act(last_user)
        ids = [*self.tok(reply, add_special_tokens=False)["input_ids"], self.tok.eos_token_id]
        return {"responses": [reply], "response_ids": [ids], "stop_reasons": ["stop"], "response_logprobs": None}


@pytest.mark.skipif(importlib.util.find_spec("skyrl_train") is None,
                    reason="skyrl-train is not installed (it declares Python 3.12; see the module docstring)")
def test_one_generation_round_through_skyrl_trains_generator(tiny_tokenizer):
    import asyncio
    from importlib.resources import files

    from omegaconf import OmegaConf
    from skyrl_train.generators.skyrl_gym_generator import SkyRLGymGenerator

    cfg = OmegaConf.load(str(files("skyrl_train") / "config" / "ppo_base_config.yaml")).generator
    cfg.max_turns, cfg.max_input_length = 8, 4096
    engine = SolverEngine(tiny_tokenizer)
    generator = SkyRLGymGenerator(cfg, OmegaConf.create({"max_env_workers": 0}), engine, tiny_tokenizer, "tiny")
    rows = gem_rows(ENV_ID, seeds=range(4))
    batch = {"prompts": [r["prompt"] for r in rows], "env_classes": [r["env_class"] for r in rows],
             "env_extras": [{"env_id": r["env_id"], "seed": r["seed"]} for r in rows], "sampling_params": None}
    out = asyncio.run(generator.generate(batch, disable_tqdm=True))

    assert out["stop_reasons"] == ["stop"] * 4
    assert [sum(r) for r in out["rewards"]] == [WIN_REWARD] * 4  # each episode won, scored by the env
    assert out["rollout_metrics"]["environment/return"] == WIN_REWARD
    turns = out["rollout_metrics"]["environment/turns"] * 4
    assert engine.calls == turns > 4  # several turns per episode, one engine call each
    for ids, mask in zip(out["response_ids"], out["loss_masks"], strict=True):
        assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)  # the env's tokens are masked out
        env_text = tiny_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        assert "higher" in env_text or "lower" in env_text
