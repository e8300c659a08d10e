"""GEM envs in verl's agent-loop rollouts (tested with verl 0.9.1).

Importing this module registers :class:`GemAgentLoop` with verl as ``gem_agent``. A
dataset row selects it with ``agent_name: gem_agent`` and names its episode in
``extra_info``: ``{"env_id": "game:GuessTheNumber-v0-easy", "seed": 3}``, optionally with
``"wrappers": "python_tool"`` (:func:`gem_rows` writes such rows). verl runs the loop once
per sample; samples of one row (``rollout.n``) share its seed, so a GRPO group shares its start.

The loop uses verl's own machinery: generation through ``self.server_manager``
(vLLM or SGLang servers), prompt and turn tokens through verl's continuous-token
builder (the chat template applied the way verl applies it for the model family),
the env's observations appended as user turns with ``response_mask`` 0, the sampler's
logprobs kept. Each turn's reward sits on that turn's last sampled token of the
episode's ``rm_scores`` (verl's token-level scores), the return as ``reward_score`` (so
no reward function is needed). Point verl at it with::

    actor_rollout_ref.rollout.mode=async
    actor_rollout_ref.rollout.agent.agent_loop_config_path=<file listing gem_integrations.verl>

Importing this module also registers ``gem_rebn`` in verl's advantage-estimator registry
(:func:`compute_gem_rebn_advantage`): ReBN's per-turn discounted returns normalised over
every turn of the batch. verl computes advantages in its trainer process, which imports
only what the config names, so select it with both::

    algorithm.adv_estimator=gem_rebn
    actor_rollout_ref.model.external_lib=gem_integrations.verl

(verl imports ``model.external_lib`` in every process that builds the model config, the
trainer's included.)
"""

from __future__ import annotations

import inspect
from typing import Any
from uuid import uuid4

from gem.host.hosted import DEFAULT_STEP_TIMEOUT, FAILURE, hosted
from gem_integrations._support import EnvSource, env_factory, import_framework, require_hook
from gem_integrations.turns import rebn_token_advantages

TESTED = "0.9.1"

agent_loop = import_framework("verl.experimental.agent_loop.agent_loop", dist="verl", extra="verl", tested=TESTED)
AgentLoopBase, AgentLoopOutput, register = agent_loop.AgentLoopBase, agent_loop.AgentLoopOutput, agent_loop.register
require_hook(all(hasattr(AgentLoopBase, name) for name in
                 ("ct_build_initial_tokens", "ct_merge_assistant_token", "ct_merge_context_msg"))
             and {"prompt_ids", "response_ids", "response_mask", "response_logprobs", "reward_score"}
             <= set(AgentLoopOutput.model_fields),
             dist="verl", tested=TESTED, extra="verl",
             what="AgentLoopBase's continuous-token helpers or AgentLoopOutput's fields changed")
require_hook("request_id" in inspect.signature(agent_loop.LLMServerClient.generate).parameters,
             dist="verl", tested=TESTED, extra="verl",
             what="LLMServerClient.generate(request_id, prompt_ids, sampling_params) changed")

core_algos = import_framework("verl.trainer.ppo.core_algos", dist="verl", extra="verl", tested=TESTED)
require_hook(hasattr(core_algos, "register_adv_est") and hasattr(core_algos, "get_adv_estimator_fn"),
             dist="verl", tested=TESTED, extra="verl",
             what="verl.trainer.ppo.core_algos.register_adv_est/get_adv_estimator_fn changed")

AGENT_NAME = "gem_agent"
ESTIMATOR = "gem_rebn"
#: extra_fields keys: one reward per turn, and the response index of the turn's last sampled token
TURN_REWARDS, TURN_ENDS = "gem_turn_rewards", "gem_turn_ends"


@core_algos.register_adv_est(ESTIMATOR)
def compute_gem_rebn_advantage(token_level_rewards: Any, response_mask: Any, config: Any = None,
                               **_: Any) -> tuple[Any, Any]:
    """verl's estimator signature: (B, T) token rewards and response mask in, (advantages, returns) out.

    The turns are the runs of 1s in ``response_mask`` and each turn's reward is what the
    turn's tokens carry (gem_integrations.turns). ``gamma`` is verl's ``algorithm.gamma``
    (1.0 without a config, verl's default); normalising by the batch's std follows
    ``algorithm.norm_adv_by_std_in_grpo`` (default True), verl's switch for the same choice
    in GRPO. ``index`` (the GRPO groups) is ignored: ReBN normalises over the whole batch.
    """
    gamma = float(_get(config, "gamma", 1.0))
    normalize_std = bool(_get(config, "norm_adv_by_std_in_grpo", True))
    advantages = rebn_token_advantages(token_level_rewards, response_mask, gamma, normalize_std)
    # as verl's outcome estimators do: without a critic, "returns" is only logged
    return advantages, advantages


def _get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    getter = getattr(config, "get", None)  # AlgoConfig and DictConfig both have .get
    return getter(key, default) if callable(getter) else getattr(config, key, default)


class GemAgentLoopOutput(AgentLoopOutput):
    """verl's AgentLoopOutput whose token-level scores hold each turn's reward at that turn's
    last sampled token (verl's own puts the whole ``reward_score`` on the last token).

    verl's trainer (``trainer.use_v1``, the default) turns each loop output into its batch
    with ``as_dict()``, ``rm_scores`` becoming ``token_level_scores``; the rewards and their
    positions also stay in ``extra_fields``. Estimators that sum a sample's token rewards
    (GRPO, RLOO) still see the episode's return.
    """

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        rewards, ends = self.extra_fields.get(TURN_REWARDS), self.extra_fields.get(TURN_ENDS)
        if rewards is not None and "rm_scores" in output:
            import torch

            scores = torch.zeros_like(output["rm_scores"])
            for reward, end in zip(rewards, ends, strict=True):
                scores[end] += reward
            output["rm_scores"] = scores
        return output


def gem_rows(env_id: str, seeds: Any, data_source: str = "gem", wrappers: str | None = None,
             env_host: str | None = None, step_timeout: float | None = None) -> list[dict[str, Any]]:
    """Dataset rows (for a parquet file) that run ``env_id`` once per seed under ``gem_agent``.

    ``prompt`` is a placeholder verl's dataset needs; the loop replaces it with the env's
    first observation. ``wrappers``: GEM wrapper names the loop puts around the env
    (``"python_tool"``: math behind gem-tools' python tool). ``env_host`` (``"thread"``,
    ``"process"``, ``"ray"``) and ``step_timeout`` override the loop's (:class:`GemAgentLoop`).
    """
    extra: dict[str, Any] = {"wrappers": wrappers} if wrappers else {}
    if env_host:
        extra["env_host"] = env_host
    if step_timeout is not None:
        extra["step_timeout"] = float(step_timeout)
    return [{
        "data_source": data_source,
        "agent_name": AGENT_NAME,
        "prompt": [{"role": "user", "content": f"{env_id} seed {int(seed)}"}],
        "extra_info": {"env_id": env_id, "seed": int(seed), **extra},
        # verl's reward code expects the column; the loop's reward_score makes it unused
        "reward_model": {"style": "rule", "ground_truth": ""},
    } for seed in seeds]


@register(AGENT_NAME)
class GemAgentLoop(AgentLoopBase):
    """One GEM episode per sample: generate, step the env, append its answer, repeat.

    The env comes from the row's ``extra_info["env_id"]`` (or the class attribute
    ``env`` in a subclass), its seed from ``extra_info["seed"]``. The episode ends when
    the env ends it or when the response reaches ``rollout.response_length`` tokens.

    The env runs behind GEM's host (:func:`gem.host.hosted.hosted`): in a thread of the
    agent-loop worker (``env_host="thread"``), a worker process, or a Ray actor of verl's
    own cluster (``"ray"``: the envs spread over the nodes, kept between episodes). A step
    that raises or overruns ``step_timeout`` seconds ends that episode truncated with the
    env's failure reward, ``extra_fields["env_failure"]`` naming the cause, and verl's
    batch goes on. A row's ``extra_info`` may set both (:func:`gem_rows`).
    """

    #: default env when a row names none
    env: EnvSource | None = None
    #: where the envs run: "thread", "process" or "ray"
    env_host: str = "thread"
    #: seconds a reset or step may take before its episode ends (None: unbounded)
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT
    #: optional system message before the first observation
    system_prompt: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        info = dict(kwargs.get("extra_info") or {})
        source = info.get("env_id") or self.env
        if source is None:
            raise ValueError("a gem_agent row needs extra_info['env_id'] (see gem_integrations.verl.gem_rows)")
        make = env_factory(source, info.get("wrappers"))
        with hosted(make, host=info.get("env_host") or self.env_host,
                    step_timeout=info.get("step_timeout", self.step_timeout)) as env:
            return await self._play(env, info.get("seed"), sampling_params)

    async def _play(self, env: Any, seed: Any, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        obs, _ = await env.areset(seed=None if seed is None else int(seed))
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": str(obs)})
        tokens = await self.ct_build_initial_tokens(messages)
        mask: list[int] = []
        logprobs: list[float] = []
        rewards: list[float] = []
        ends: list[int] = []  # each turn's last sampled token, an index into the response
        request_id = uuid4().hex  # one id per episode: the server keeps its prefix cached
        total, turns, success, failure = 0.0, 0, False, ""
        while True:
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=tokens,
                                                     sampling_params=sampling_params)
            merged, mask, new_logprobs = await self.ct_merge_assistant_token(
                tokens, out.token_ids, mask, logprobs if (logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs or None)
            tokens, logprobs = merged.token_ids, new_logprobs or []
            reply = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            obs, reward, terminated, truncated, step_info = await env.astep(reply)
            end = _last_sampled(mask)
            if ends and end == ends[-1]:
                # the model sampled nothing this turn: verl has no token for it, so its reward joins the
                # previous turn's (where gem_integrations.turns would read it too)
                rewards[-1] += float(reward)
            else:
                rewards.append(float(reward))
                ends.append(max(end, 0))
            total += float(reward)
            turns += 1
            success = bool(step_info.get("correct", success))
            if FAILURE in step_info:
                failure = str(step_info[FAILURE]["type"])
            if terminated or truncated or len(mask) >= self.response_length:
                break
            before = [*messages, {"role": "assistant", "content": reply}]
            messages = [*before, {"role": "user", "content": str(obs)}]
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(
                before, messages, tokens, mask, logprobs or None)
            if len(new_mask) >= self.response_length:
                break
            tokens, mask, logprobs = merged.token_ids, new_mask, (new_logprobs or []) if logprobs else []
        n = self.response_length
        response_ids = tokens[len(tokens) - len(mask):]
        # a turn cut by the response budget keeps its reward on its last token inside the budget
        ends = [min(end, n - 1) for end in ends]
        return GemAgentLoopOutput(
            prompt_ids=tokens[: len(tokens) - len(mask)],
            response_ids=response_ids[:n],
            response_mask=mask[:n],
            response_logprobs=logprobs[:n] if logprobs else None,
            reward_score=total,
            num_turns=2 * turns + 1,
            metrics={},
            extra_fields={"env_return": total, "env_turns": turns, "env_success": success,
                          "env_failure": failure, TURN_REWARDS: rewards, TURN_ENDS: ends},
        )


def _last_sampled(mask: list[int]) -> int:
    """Index of the last 1 in ``mask`` (the turn just merged ends there; the chat template may
    append unsampled tokens after it), -1 when there is none."""
    return max((i for i, m in enumerate(mask) if m), default=-1)


__all__ = ["AGENT_NAME", "ESTIMATOR", "TURN_ENDS", "TURN_REWARDS", "GemAgentLoop", "GemAgentLoopOutput",
           "compute_gem_rebn_advantage", "gem_rows"]
