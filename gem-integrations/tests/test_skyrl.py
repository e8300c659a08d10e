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
expects a list of ids). Where skyrl-train is absent that test is skipped, and so are the tests
after it: ``gem_rebn`` through skyrl-train's ``AdvantageEstimatorRegistry``
(``ppo_utils.compute_advantages_and_returns`` called with the trainer's arguments) and through
``RayPPOTrainer.compute_advantages_and_returns`` (gem's subclass) against gem-train's ReBN, three-turn
episodes through the real ``SkyRLGymGenerator`` (each turn's reward on its last sampled token, the
engine's exact token ids and logprobs), and the recipes' dry run refusing broken recipes.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

pytest.importorskip("skyrl_gym")

import skyrl_gym
from adapter_kit import ENV_ID, assert_missing_framework_is_one_line, secret_of
from omegaconf import DictConfig, OmegaConf

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


# -- skyrl-train's side: gem_rebn in its estimator registry, per-turn rewards through its generator,
# the recipes' dry run. The nox session installs skyrl-train on Python 3.11 (see the module
# docstring); the reference is gem-train's ReBN (gem_train.algorithms.rebn.rebn_turn_advantages).

HAS_SKYRL_TRAIN = importlib.util.find_spec("skyrl_train") is not None
needs_skyrl_train = pytest.mark.skipif(not HAS_SKYRL_TRAIN, reason="skyrl-train is not installed "
                                       "(it declares Python 3.12; see the module docstring)")
if HAS_SKYRL_TRAIN:
    import torch
    import yaml
    from skyrl_train.dataset.preprocess import convert_prompts_responses_to_batch_tensors
    from skyrl_train.utils import ppo_utils
    from skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry

    from gem_integrations.skyrl import REBN_ESTIMATOR, check_rebn_config, gem_trainer_class, register_estimator
    from gem_train.algorithms.rebn import rebn_turn_advantages

GAMMA = 0.9


def base_config(**algorithm):
    """skyrl-train's shipped ppo_base_config.yaml with the algorithm overrides."""
    cfg = OmegaConf.load(str(files("skyrl_train") / "config" / "ppo_base_config.yaml"))
    cfg.trainer.algorithm.advantage_estimator = REBN_ESTIMATOR
    cfg.trainer.algorithm.gamma = GAMMA
    for key, value in algorithm.items():
        cfg.trainer.algorithm[key] = value
    return cfg


def synthetic_batch(seed=0, episodes=6, pad_rows=1):
    """(rewards, response_mask, loss_mask, per-episode turn rewards), shaped as SkyRL's
    convert_to_training_input + pad_batch make them: the response mask covers the model's and the
    env's tokens, the loss mask only the sampled ones; each turn's reward on its last sampled
    token; padding rows (pad_batch copies real rows) have a zero loss mask."""
    rng = random.Random(seed)
    rows, turn_rewards = [], []
    for _ in range(episodes):
        rewards, mask, turns = [], [], []
        for t in range(rng.randint(1, 4)):
            if t:
                mask += [0] * rng.randint(1, 4)  # the env's observation tokens
                rewards += [0.0] * (len(mask) - len(rewards))
            n = rng.randint(1, 5)
            r = round(rng.uniform(-1, 1), 3)
            mask += [1] * n
            rewards += [0.0] * (n - 1) + [r]
            turns.append(r)
        rows.append((rewards, mask))
        turn_rewards.append(turns)
    width = max(len(m) for _, m in rows) + 2
    reward_t = torch.zeros(episodes + pad_rows, width)
    response_mask = torch.zeros(episodes + pad_rows, width, dtype=torch.long)
    loss_mask = torch.zeros_like(response_mask)
    for b, (rewards, mask) in enumerate(rows):
        reward_t[b, :len(rewards)] = torch.tensor(rewards)
        response_mask[b, :len(mask)] = 1
        loss_mask[b, :len(mask)] = torch.tensor(mask)
    for p in range(pad_rows):
        reward_t[episodes + p], response_mask[episodes + p] = reward_t[p], response_mask[p]
    return reward_t, response_mask, loss_mask, turn_rewards


def expected_token_advantages(loss_mask, turn_rewards, gamma=GAMMA, normalize_std=True):
    """gem-train's ReBN per turn, spread over each turn's sampled tokens."""
    per_turn = rebn_turn_advantages(turn_rewards, gamma, normalize_std)
    out = torch.zeros(loss_mask.shape, dtype=torch.float64)
    for b, values in enumerate(per_turn):
        positions = loss_mask[b].nonzero().flatten().tolist()
        starts = [p for i, p in enumerate(positions) if i == 0 or positions[i - 1] != p - 1]
        ends = [p + 1 for i, p in enumerate(positions) if i == len(positions) - 1 or positions[i + 1] != p + 1]
        assert len(starts) == len(values)
        for s, e, v in zip(starts, ends, values, strict=True):
            out[b, s:e] = v
    return out


@needs_skyrl_train
def test_importing_the_adapter_registers_gem_rebn():
    assert REBN_ESTIMATOR == "gem_rebn" and "gem_rebn" in AdvantageEstimatorRegistry.list_available()
    assert register_estimator() is True  # a second registration (another import) is a no-op
    assert AdvantageEstimatorRegistry.list_available().count("gem_rebn") == 1


@needs_skyrl_train
@pytest.mark.parametrize("normalize_std", [True, False])
def test_registry_call_equals_gem_trains_rebn(normalize_std):
    """The estimator as skyrl-train's trainer calls it, through ppo_utils.compute_advantages_and_returns."""
    rewards, response_mask, loss_mask, turns = synthetic_batch()
    cfg = base_config(grpo_norm_by_std=normalize_std)
    advantages, returns = ppo_utils.compute_advantages_and_returns(
        token_level_rewards=rewards, response_mask=response_mask, index=[f"u{i}" for i in range(len(rewards))],
        adv_estimator=cfg.trainer.algorithm.advantage_estimator, config=cfg.trainer.algorithm, values=None,
        gamma=cfg.trainer.algorithm.gamma, lambd=cfg.trainer.algorithm.lambd, grpo_norm_by_std=normalize_std,
        loss_mask=loss_mask)
    want = expected_token_advantages(loss_mask, turns, normalize_std=normalize_std)
    assert advantages.dtype == rewards.dtype and advantages.shape == rewards.shape
    assert torch.allclose(advantages.double(), want, atol=1e-6, rtol=0)
    assert torch.equal(advantages, returns)
    assert not advantages[loss_mask == 0].any()  # the env's tokens and the padding rows carry nothing


def trainer_with(cfg):
    """gem's RayPPOTrainer subclass with only its config set (the estimator step needs nothing else)."""
    trainer = object.__new__(gem_trainer_class())
    trainer.cfg, trainer.all_metrics = cfg, {}
    return trainer


def training_batch(rewards, response_mask, loss_mask, pad_size=0):
    from skyrl_train.training_batch import TrainingInputBatch

    data = TrainingInputBatch({"rewards": rewards, "response_mask": response_mask, "loss_mask": loss_mask,
                               "values": None})
    data.metadata = {"uids": [f"u{i}" for i in range(len(rewards))], "avg_response_length": 1.0, "pad_size": pad_size}
    return data


@needs_skyrl_train
def test_skyrl_trainers_own_advantage_step_through_gems_trainer_equals_gem_train():
    rewards, response_mask, loss_mask, turns = synthetic_batch(seed=3, episodes=8)
    data = trainer_with(base_config()).compute_advantages_and_returns(
        training_batch(rewards, response_mask, loss_mask, pad_size=1))
    want = expected_token_advantages(loss_mask, turns)
    assert torch.allclose(data["advantages"].double(), want, atol=1e-6, rtol=0)


@needs_skyrl_train
def test_without_the_loss_mask_it_refuses_in_one_line_rather_than_read_one_turn():
    """skyrl-train's stock trainer passes only the response mask, which covers the env's tokens:
    read as turns it would make each trajectory one turn and drop the turn-level credit."""
    rewards, response_mask, _, _ = synthetic_batch()
    with pytest.raises(ValueError, match="loss mask") as err:
        ppo_utils.compute_advantages_and_returns(
            token_level_rewards=rewards, response_mask=response_mask, index=[], adv_estimator=REBN_ESTIMATOR,
            config=base_config().trainer.algorithm, values=None, gamma=GAMMA)
    assert "\n" not in str(err.value)


@needs_skyrl_train
def test_settings_that_would_drop_per_turn_rewards_are_refused():
    cfg = base_config()
    check_rebn_config(cfg)
    cfg.generator.step_wise_trajectories = True
    with pytest.raises(ValueError, match="step_wise_trajectories"):
        check_rebn_config(cfg)
    cfg = base_config()
    cfg.generator.chat_template.name_or_path = "qwen3_without_thinking"
    with pytest.raises(ValueError, match="chat_template"):
        check_rebn_config(cfg)
    cfg.trainer.algorithm.advantage_estimator = "grpo"
    check_rebn_config(cfg)  # other estimators are skyrl-train's business


class TurnBonus:
    """GuessTheNumber with 0.1 * turn added to every step's reward, so each of the three turns
    has a reward of its own (the game's own are 0, 0, 1) and a misplaced one shows."""

    def __init__(self):
        self.env, self.turn = gem.make(ENV_ID), 0

    def reset(self, seed=None):
        self.turn = 0
        return self.env.reset(seed=seed)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.turn += 1
        return obs, reward + 0.1 * self.turn, terminated, truncated, info

    def close(self):
        self.env.close()


class ScriptedEngine:
    """Stand-in for skyrl-train's inference engine client: per session, two wrong guesses then the
    secret; every reply's token ids and logprobs are recorded, as a sampler would report them."""

    def __init__(self, tokenizer, secrets):
        self.tok, self.secrets, self.turn, self.sampled, self.order = tokenizer, secrets, {}, {}, []

    async def generate(self, engine_input):
        session = engine_input["session_ids"][0]
        if session not in self.turn:  # the rows are generated one at a time, in order
            self.turn[session] = 0
            self.order.append(session)
        secret = self.secrets[self.order.index(session)]
        k = self.turn[session]
        self.turn[session] += 1
        wrong = [g for g in range(1, 11) if g != secret][:2]
        reply = f"\\boxed{{{[*wrong, secret][k]}}}"
        ids = [*self.tok(reply, add_special_tokens=False)["input_ids"], self.tok.eos_token_id]
        logprobs = [-0.01 * (i + 1) - k for i in range(len(ids))]
        self.sampled.setdefault(session, []).append((ids, logprobs))
        return {"responses": [reply], "response_ids": [ids], "stop_reasons": ["stop"],
                "response_logprobs": [logprobs]}


def runs(mask):
    spans, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


@needs_skyrl_train
def test_three_turn_episode_through_skyrl_trains_generator_keeps_each_turns_reward_and_tokens(tiny_tokenizer):
    """Three-turn GuessTheNumber episodes through SkyRLGymGenerator.generate: each turn's reward
    lands on that turn's last sampled token, the response holds the engine's exact token ids and
    logprobs with the env's tokens out of the loss, and gem's trainer turns the batch into
    gem-train's ReBN advantages."""
    from skyrl_train.generators.skyrl_gym_generator import SkyRLGymGenerator

    register_env("gem-turn-bonus", env=TurnBonus)
    try:
        cfg = base_config()
        gen_cfg = cfg.generator
        gen_cfg.max_turns, gen_cfg.max_input_length = 8, 4096
        gen_cfg.sampling_params.logprobs = 0
        seeds = [0, 1, 2]
        engine = ScriptedEngine(tiny_tokenizer, [secret_of(ENV_ID, s) for s in seeds])
        generator = SkyRLGymGenerator(gen_cfg, OmegaConf.create({"max_env_workers": 0}), engine, tiny_tokenizer,
                                      "tiny")
        rows = gem_rows(ENV_ID, seeds=seeds, env_class="gem-turn-bonus")
        outs = []
        for r in rows:  # one at a time, so the engine's sessions follow the rows
            batch = {"prompts": [r["prompt"]], "env_classes": [r["env_class"]],
                     "env_extras": [{"seed": r["seed"]}], "sampling_params": None}
            outs.append(asyncio.run(generator.generate(batch, disable_tqdm=True)))
    finally:
        from skyrl_gym.envs import registration

        registration.deregister("gem-turn-bonus")

    per_turn = [0.1, 0.2, 1.3]  # the game's 0, 0, 1 (two misses, then the secret) plus the bonus
    for out, session in zip(outs, engine.order, strict=True):
        (ids,), (mask,), (rewards,), (logprobs,) = (out["response_ids"], out["loss_masks"], out["rewards"],
                                                    out["rollout_logprobs"])
        assert len(ids) == len(mask) == len(rewards) == len(logprobs)
        spans = runs(mask)
        assert len(spans) == 3
        sampled = engine.sampled[session]
        for (start, end), (want_ids, want_lp) in zip(spans, sampled, strict=True):
            assert ids[start:end] == want_ids  # token in, token out: the sampler's ids, not a re-tokenisation
            assert logprobs[start:end] == pytest.approx(want_lp)
        assert [rewards[end - 1] for _, end in spans] == pytest.approx(per_turn)
        assert sum(1 for r in rewards if r) == 3  # nothing else carries reward
        env_text = tiny_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
        assert "higher" in env_text or "lower" in env_text

    # the generator's output as the trainer batches it, then gem's trainer's advantage step
    prompts = [o["prompt_token_ids"][0] for o in outs]
    seq, _, response_mask, reward_t, loss_mask, _ = convert_prompts_responses_to_batch_tensors(
        tiny_tokenizer, prompts, [o["response_ids"][0] for o in outs], [o["rewards"][0] for o in outs],
        [o["loss_masks"][0] for o in outs])
    data = trainer_with(cfg).compute_advantages_and_returns(training_batch(reward_t, response_mask, loss_mask))
    want = expected_token_advantages(loss_mask, [per_turn] * len(outs))
    assert torch.allclose(data["advantages"].double(), want, atol=1e-6, rtol=0)
    # identical episodes: every turn's advantage is its return's distance from the batch mean
    assert len(set(data["advantages"][0][loss_mask[0].bool()].tolist())) == 3


ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "examples" / "skyrl" / "recipes"


@pytest.fixture(scope="module")
def gem_skyrl():
    spec = importlib.util.spec_from_file_location("gem_skyrl", ROOT / "examples" / "skyrl" / "gem_skyrl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variant(tmp_path, name, replace=None, drop=(), add=()):
    recipe = yaml.safe_load((RECIPES / f"{name}.yaml").read_text())
    overrides = [o for o in recipe["overrides"] if o.split("=", 1)[0] not in drop]
    recipe["overrides"] = [replace.get(o.split("=", 1)[0], o) if replace else o for o in overrides] + list(add)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


@needs_skyrl_train
def test_every_recipe_has_a_launch_script_naming_it():
    recipes = sorted(RECIPES.glob("*.yaml"))
    assert len(recipes) == 4
    for recipe in recipes:
        script = recipe.with_suffix(".sh").read_text()
        assert f"examples/skyrl/recipes/{recipe.name}" in script and "dry-run" in script


@needs_skyrl_train
def test_a_shipped_recipe_passes(gem_skyrl, capsys):
    gem_skyrl.dry_run(RECIPES / "game_rebn_qwen3_4b_2nodes.yaml")
    assert "2 node(s) x 8 GPUs, gem_rebn (gamma 0.9)" in capsys.readouterr().out


@needs_skyrl_train
@pytest.mark.parametrize(("change", "message"), [
    ({"replace": {"trainer.algorithm.gamma": "trainer.algorithm.gamma=1.0"}}, "gamma"),
    ({"replace": {"trainer.algorithm.advantage_estimator": "trainer.algorithm.advantage_estimator=grpo"}},
     "advantage_estimator"),
    # the recipe says two nodes; a config for one (consistent in itself) passes skyrl-train's checks
    ({"replace": {"trainer.placement.policy_num_nodes": "trainer.placement.policy_num_nodes=1",
                  "generator.inference_engine_tensor_parallel_size":
                  "generator.inference_engine_tensor_parallel_size=1"}}, "policy placement 1x8"),
    # skyrl-train's validate_cfg: colocated engines must fill the policy's GPUs
    ({"replace": {"generator.num_inference_engines": "generator.num_inference_engines=4"}}, "num_rollout_gpus"),
    ({"replace": {"generator.max_turns": "generator.max_turns=4"}}, "max_turns"),
    ({"add": ["generator.step_wise_trajectories=true"]}, "step_wise_trajectories"),
    ({"replace": {"trainer.algorithm.advantage_estimator": "trainer.algorithm.advantage_estimator=gem_rebnn"}},
     "gem_rebnn"),  # skyrl-train's validate_cfg: not in the estimator registry
    ({"replace": {"trainer.policy_mini_batch_size": "trainer.policy_mini_batch_size=96"}}, ""),  # batch sizes
])
@needs_skyrl_train
def test_a_broken_recipe_fails_the_dry_run(gem_skyrl, tmp_path, change, message):
    path = variant(tmp_path, "game_rebn_qwen3_4b_2nodes", **change)
    with pytest.raises((SystemExit, AssertionError, ValueError)) as err:
        gem_skyrl.dry_run(path)
    assert message in str(err.value)


@pytest.mark.parametrize("fault", ["raise", "hang", "die"])
def test_a_failing_env_ends_only_its_episode_and_the_generator_goes_on(fault):
    """A GEM env that raises, hangs past the step timeout, or whose worker process dies ends that
    episode (done, reward 0, the failure named in the step's metadata) instead of raising into
    skyrl-train's generator; another episode, played alongside, goes on with GEM's own rewards."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS

    from gem.factory import EnvFactory
    from gem.testing.envs import FaultyEnv

    action, host, kind = FAULTS[fault]
    make = EnvFactory("test:Faulty-v0", entry_point="gem.testing.envs:FaultyEnv")  # known in a fresh worker
    settings = {"seed": 2, "env_host": host, "step_timeout": FAULT_STEP_TIMEOUT}
    failing, healthy = GemSkyRLEnv(extras=settings, env=make), GemSkyRLEnv(extras=settings, env=make)
    twin = FaultyEnv()
    try:
        assert failing.init([])[0] == healthy.init([])[0] == [{"role": "user", "content": twin.reset(seed=2)[0]}]
        out = failing.step(action)
        assert out["done"] and out["reward"] == 0.0 and out["metadata"]["info"]["failure"]["type"] == kind
        for _ in range(3):
            played, expected = healthy.step("\\boxed{5}"), twin.step("\\boxed{5}")
            assert (played["reward"], played["done"]) == (expected[1], expected[2] or expected[3])
    finally:
        failing.close()
        healthy.close()
