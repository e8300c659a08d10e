"""``gem_rebn`` in skyrl-train's real estimator registry, and per-turn rewards through its real generator.

Runs where skyrl-train 0.3.1 imports: it declares Python ==3.12.*, so the nox session
(``nox -s "integration(framework='skyrl')"``) installs the wheel with ``--no-deps
--ignore-requires-python`` beside the modules its registry, generator, trainer and hydra
config import (examples/skyrl/README.md's install block). Everything here is skyrl-train's
own code on CPU: ``AdvantageEstimatorRegistry``, ``ppo_utils.compute_advantages_and_returns``
called with the arguments ``RayPPOTrainer.compute_advantages_and_returns`` passes,
``RayPPOTrainer.compute_advantages_and_returns`` itself (through gem's subclass),
``SkyRLGymGenerator.generate`` with a scripted engine, and ``convert_prompts_responses_to_batch_tensors``.
The reference is gem-train's ReBN (``gem_train.algorithms.rebn.rebn_turn_advantages``).
"""

from __future__ import annotations

import asyncio
import random
from importlib.resources import files

import pytest

pytest.importorskip("skyrl_gym")
pytest.importorskip("skyrl_train")

import torch
from adapter_kit import ENV_ID, secret_of
from omegaconf import OmegaConf
from skyrl_train.dataset.preprocess import convert_prompts_responses_to_batch_tensors
from skyrl_train.utils import ppo_utils
from skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry

import gem
from gem_integrations.skyrl import (
    REBN_ESTIMATOR,
    check_rebn_config,
    gem_rows,
    gem_trainer_class,
    register_env,
    register_estimator,
)
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


def test_importing_the_adapter_registers_gem_rebn():
    assert REBN_ESTIMATOR == "gem_rebn" and "gem_rebn" in AdvantageEstimatorRegistry.list_available()
    assert register_estimator() is True  # a second registration (another import) is a no-op
    assert AdvantageEstimatorRegistry.list_available().count("gem_rebn") == 1


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


def test_skyrl_trainers_own_advantage_step_through_gems_trainer_equals_gem_train():
    rewards, response_mask, loss_mask, turns = synthetic_batch(seed=3, episodes=8)
    data = trainer_with(base_config()).compute_advantages_and_returns(
        training_batch(rewards, response_mask, loss_mask, pad_size=1))
    want = expected_token_advantages(loss_mask, turns)
    assert torch.allclose(data["advantages"].double(), want, atol=1e-6, rtol=0)


def test_without_the_loss_mask_it_refuses_in_one_line_rather_than_read_one_turn():
    """skyrl-train's stock trainer passes only the response mask, which covers the env's tokens:
    read as turns it would make each trajectory one turn and drop the turn-level credit."""
    rewards, response_mask, _, _ = synthetic_batch()
    with pytest.raises(ValueError, match="loss mask") as err:
        ppo_utils.compute_advantages_and_returns(
            token_level_rewards=rewards, response_mask=response_mask, index=[], adv_estimator=REBN_ESTIMATOR,
            config=base_config().trainer.algorithm, values=None, gamma=GAMMA)
    assert "\n" not in str(err.value)


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
