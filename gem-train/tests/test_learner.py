"""The learner: token layout, micro-batching that does not change the update, and
updates that move log-probabilities the way the advantages say."""

from __future__ import annotations

import copy

import pytest
import torch

from gem_train.config import AlgoConfig, TrainerConfig
from gem_train.learner import Learner, pack
from gem_train.model import load_policy
from gem_train.rollout import TurnSample


def test_pack_layout_by_hand():
    s = TurnSample(prompt_ids=[5, 6, 7], response_ids=[8, 9], logprobs=[-0.1, -0.2], finish_reason="stop")
    t = TurnSample(prompt_ids=[5], response_ids=[4], logprobs=[-0.3], finish_reason="length")
    b = pack([s, t], pad_id=0)
    assert b["input_ids"].tolist() == [[5, 6, 7, 8, 9], [5, 4, 0, 0, 0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    # position t predicts token t+1: the response tokens 8, 9 are predicted at positions 2 and 3
    assert b["targets"].tolist() == [[6, 7, 8, 9], [4, 0, 0, 0]]
    assert b["mask"].tolist() == [[0, 0, 1, 1], [1, 0, 0, 0]]
    assert torch.allclose(b["old_logprobs"], torch.tensor([[0, 0, -0.1, -0.2], [-0.3, 0, 0, 0]]))


def samples_from(model, tok, n: int = 6) -> list[TurnSample]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        prompt = tok.apply_chat_template([{"role": "user", "content": f"Guess {i}"}], tokenize=False,
                                         add_generation_prompt=True)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        response = torch.randint(3, len(tok), (2 + i % 3,), generator=gen).tolist()
        with torch.no_grad():
            logits = model(torch.tensor([ids + response])).logits[0, len(ids) - 1:-1]
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None]).squeeze(-1)
        out.append(TurnSample(ids, response, lp.tolist(), "stop"))
    return out


def grads_after_update(model, samples, advantages, micro: int, loss_norm: str) -> dict[str, torch.Tensor]:
    model = copy.deepcopy(model)
    algo = AlgoConfig(loss_norm=loss_norm)
    learner = Learner(model, algo, TrainerConfig(micro_batch_size=micro, max_grad_norm=None), 1.0, 8.0, 0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    learner.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)  # the step is the gradient itself
    learner.update(samples, advantages)
    return {k: before[k] - v for k, v in model.state_dict().items()}


@pytest.mark.parametrize("loss_norm", ["constant", "length"])
def test_micro_batches_accumulate_to_the_full_batch_gradient(tiny_model_path, loss_norm):
    model, tok = load_policy(tiny_model_path)
    samples = samples_from(model, tok)
    adv = [1.0, -0.5, 0.3, 0.0, -1.2, 0.7]
    whole = grads_after_update(model, samples, adv, micro=6, loss_norm=loss_norm)
    parts = grads_after_update(model, samples, adv, micro=2, loss_norm=loss_norm)
    for name in whole:
        assert torch.allclose(whole[name], parts[name], atol=1e-5), name


@pytest.mark.parametrize("loss", ["reinforce", "ppo_clip"])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_update_moves_the_logprob_with_the_advantage(tiny_model_path, loss, advantage):
    model, tok = load_policy(tiny_model_path)
    [sample] = samples_from(model, tok, n=1)
    learner = Learner(model, AlgoConfig(loss=loss, epochs=3), TrainerConfig(lr=1e-3), 1.0, 8.0, tok.pad_token_id)
    metrics = learner.update([sample], [advantage])
    assert metrics["optimizer_steps"] == 3 and metrics["grad_norm"] > 0
    [after] = samples_from(model, tok, n=1)  # same prompt and response, logprobs under the new weights
    assert (sum(after.logprobs) - sum(sample.logprobs)) * advantage > 0


def test_turns_without_a_response_are_left_out(tiny_model_path):
    model, tok = load_policy(tiny_model_path)
    learner = Learner(model, AlgoConfig(), TrainerConfig(), 1.0, 8.0, tok.pad_token_id)
    empty = TurnSample([1, 2, 3], [], [], "prompt_too_long", -0.1)
    assert learner.update([empty], [1.0]) == {}


def ppo_learner(model, tok, critic_kind: str, **algo) -> Learner:
    from gem_train.critic import make_critic

    cfg = AlgoConfig(name="ppo", loss="ppo_clip", critic=critic_kind, **algo)
    return Learner(model, cfg, TrainerConfig(lr=1e-2, micro_batch_size=4), 1.0, 8.0, tok.pad_token_id,
                   critic=make_critic(model, critic_kind))


@pytest.mark.parametrize("critic_kind", ["shared", "separate"])
def test_ppo_critic_learns_the_value_targets(tiny_model_path, critic_kind):
    model, tok = load_policy(tiny_model_path)
    samples = samples_from(model, tok)
    learner = ppo_learner(model, tok, critic_kind, epochs=1, value_clip=None)
    old = learner.values(samples)
    assert old == [0.0] * 6  # the head starts at zero
    targets = [1.0, -1.0, 0.5, 0.0, 1.0, -0.5]
    start = sum((o - t) ** 2 for o, t in zip(old, targets))
    for _ in range(30):
        metrics = learner.update(samples, [0.0] * 6, old_values=learner.values(samples), value_targets=targets)
    now = learner.values(samples)
    assert sum((v - t) ** 2 for v, t in zip(now, targets)) < 0.25 * start
    assert metrics["value_loss"] >= 0 and metrics["critic_grad_norm"] > 0
    policy_params = {id(p) for p in model.parameters()}
    critic_params = {id(p) for p in learner.critic.parameters()}
    # a separate critic shares no parameter with the policy; a shared one is only a head
    assert not policy_params & critic_params
    assert (len(critic_params) > 2) == (critic_kind == "separate")


@pytest.mark.parametrize("clip", [0.05, None])
def test_value_clip_stops_the_critic_once_it_leaves_the_range(tiny_model_path, clip):
    model, tok = load_policy(tiny_model_path)
    samples = samples_from(model, tok)
    learner = ppo_learner(model, tok, "shared", epochs=1, value_clip=clip)
    # plain SGD: no momentum carries the critic on once its gradient is gone
    learner.optimizer = torch.optim.SGD(learner.critic.parameters(), lr=0.05)
    old = learner.values(samples)
    moved = []
    for _ in range(15):  # one batch of experience, many steps: the old values stay those of collection time
        learner.update(samples, [0.0] * 6, old_values=old, value_targets=[5.0] * 6)
        moved.append(max(learner.values(samples)))
    if clip is None:
        assert moved[-1] > 1.0
    else:
        # a value past old + clip gets no gradient: once all are past, the critic stops
        assert min(learner.values(samples)) > clip and moved[-1] == pytest.approx(moved[-2]) and moved[-1] < 1.0


def test_ppo_learner_needs_values(tiny_model_path):
    model, tok = load_policy(tiny_model_path)
    learner = ppo_learner(model, tok, "shared")
    with pytest.raises(ValueError, match="old_values and value_targets"):
        learner.update(samples_from(model, tok, 1), [1.0])
    plain = Learner(model, AlgoConfig(), TrainerConfig(), 1.0, 8.0, tok.pad_token_id)
    with pytest.raises(ValueError, match="no critic"):
        plain.values(samples_from(model, tok, 1))


def test_ppo_bootstraps_episodes_cut_short_by_a_turn_limit(tiny_model_path):
    """GAE's value after the last turn: 0 when the game ended, V(final observation) when a turn limit cut it."""
    from toy_env import ToyGuess

    from gem_train.algos import PPO
    from gem_train.config import TrainConfig
    from gem_train.rollout import collect, encode_prompt

    model, tok = load_policy(tiny_model_path)

    class AlwaysTwo:
        """A scripted policy: guesses 2, and reports the turn as the engine policy would."""

        async def act(self, observation, context=None):
            prompt = encode_prompt(tok, observation, templated=False)
            return "\\boxed{2}", {"sample": TurnSample(prompt, [5], [-1.0], "stop")}

    # one guess allowed: right (target 2) ends the game, wrong is cut short by the env's turn limit
    episodes = collect(lambda: ToyGuess(high=4, max_turns=1), AlwaysTwo(), seeds=list(range(12)))
    won = [ep.success for ep in episodes]
    assert any(won) and not all(won) and [ep.cut_short for ep in episodes] == [not w for w in won]
    cfg = TrainConfig()
    cfg.algo = AlgoConfig(name="ppo", loss="ppo_clip", gamma=0.5, gae_lambda=1.0)
    ppo = PPO(cfg.algo, model, encode=lambda obs: encode_prompt(tok, obs, templated=False),
              max_model_len=cfg.model.max_model_len)
    learner = Learner(model, cfg.algo, TrainerConfig(), 1.0, 8.0, tok.pad_token_id, critic=ppo.critic)
    ppo.bind(learner)
    with torch.no_grad():
        learner.critic.head.bias.fill_(1.0)  # V = 1 everywhere
    inputs = ppo.prepare(episodes).inputs
    # won: target r = 1; cut short: r + gamma * V(final) = 0 + 0.5 * 1
    assert inputs["value_targets"] == [pytest.approx(1.0 if w else 0.5) for w in won]
    plain = PPO(cfg.algo, critic=ppo.critic).bind(learner).prepare(episodes).inputs  # no encoder: no bootstrap
    assert plain["value_targets"] == [pytest.approx(1.0 if w else 0.0) for w in won]
