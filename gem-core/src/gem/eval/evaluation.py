"""Run an evaluation: every (env, episode, sample) not yet in the output folder, concurrently.

The output folder holds ``episodes.jsonl`` (one line per episode), ``run.json`` (the
settings that determine scores) and the reports ``summary.json`` / ``summary.md``,
which are recomputed from the JSONL at the end of every run. Running the same
evaluation again resumes it: finished episodes are skipped.

>>> config = EvalConfig(["game:GuessTheNumber-v0-easy"], model="openai:gpt-4o-mini", episodes=50)
>>> result = evaluate(config)                 # doctest: +SKIP
>>> result.summaries[0]["success_rate"]       # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gem.core import Env
from gem.errors import EpisodeTimeoutError, GemError, StepTimeoutError
from gem.eval.metrics import markdown_table, summarize
from gem.eval.models import ChatModel, Sampling, make_model, parse_model_spec
from gem.eval.policy import ChatPolicy, EpisodeLog
from gem.eval.progress import Progress
from gem.eval.records import EpisodeKey, EpisodeStore, needs_rerun
from gem.runner import Trajectory, run_episodes
from gem.wrappers.history import MODES as HISTORY_MODES

# settings that change scores: a resumed run must use the same ones
SCORED_SETTINGS = ("model", "seed", "temperature", "top_p", "max_tokens", "system_prompt", "wrappers", "max_turns",
                   "env_kwargs")


@dataclass
class EvalConfig:
    """One evaluation; the fields mirror ``gem eval``'s options."""

    env_ids: list[str]
    # openai:NAME, http(s)://HOST/v1, vllm:PATH or hf:PATH
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    # episode i of an env resets with seed `seed + i`
    episodes: int = 10
    # rollouts per episode (avg@k, pass@k)
    samples: int = 1
    seed: int = 0
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    system_prompt: str | None = None
    # wrapper names (get_wrapper_fns); `messages` is added unless a history mode is named
    wrappers: str | None = None
    max_turns: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    concurrency: int = 16
    # seconds an env reset/step, and a whole episode (model time included), may take; an
    # episode that overruns is recorded as a failure with error_kind "timeout"
    step_timeout: float | None = None
    episode_timeout: float | None = None
    # None: gem-eval/<model>
    output: str | Path | None = None
    overwrite: bool = False
    max_retries: int = 5
    retry_backoff: float = 0.5
    request_timeout: float = 120.0
    # vllm:/hf: engines only
    max_model_len: int = 4096
    progress: bool = True

    def output_dir(self) -> Path:
        if self.output is not None:
            return Path(self.output)
        return Path("gem-eval") / (re.sub(r"[^A-Za-z0-9._-]+", "_", self.model).strip("_")[:80] or "model")

    def wrapper_names(self) -> list[str]:
        names = [w.strip() for w in (self.wrappers or "").split(",") if w.strip()]
        if not any(n in HISTORY_MODES for n in names):
            names.append("messages")
        return names

    def scored_settings(self) -> dict[str, Any]:
        values = asdict(self)
        values["wrappers"] = ",".join(self.wrapper_names())
        return {k: values[k] for k in SCORED_SETTINGS}


@dataclass
class EvalResult:
    """What a run did; ``summaries`` has one row per env (see :func:`gem.eval.metrics.summarize_env`)."""

    summaries: list[dict[str, Any]]
    output: Path
    ran: int
    resumed: int
    seconds: float


def episode_success(traj: Trajectory) -> bool:
    """The env said ``correct`` on the last turn, or (envs that do not say) the episode
    terminated with a positive reward. An episode cut by an error is a failure."""
    if traj.error is not None or not traj.turns:
        return False
    last = traj.turns[-1]
    if "correct" in last.info:
        return bool(last.info["correct"])
    return last.terminated and last.reward > 0


def tool_calls(traj: Trajectory) -> int:
    """Tool calls of an episode, from the tool wrapper's ``tool_used`` flags / ``tool_use_counter``."""
    flagged = sum(bool(t.info.get("tool_used")) for t in traj.turns)
    counted = max((int(t.info.get("tool_use_counter", 0) or 0) for t in traj.turns), default=0)
    return max(flagged, counted)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


def _last_text(observation: Any) -> Any:
    # with the messages wrapper the observation is the whole chat; its news is the last message
    if isinstance(observation, list) and observation and isinstance(observation[-1], dict):
        return observation[-1].get("content")
    return observation


def episode_record(key: EpisodeKey, seed: int, traj: Trajectory, log: EpisodeLog, model: str) -> dict[str, Any]:
    """The JSONL line of one finished episode."""
    error_kind = log.error_kind
    if error_kind is None and traj.error is not None:
        timed_out = traj.error.startswith((StepTimeoutError.__name__, EpisodeTimeoutError.__name__))
        error_kind = "timeout" if timed_out else "env"
    return {
        "env_id": key.env_id,
        "episode": key.episode,
        "sample": key.sample,
        "seed": seed,
        "model": model,
        "success": episode_success(traj),
        "return": traj.total_return,
        "turns": len(traj.turns),
        "terminated": bool(traj.turns and traj.turns[-1].terminated),
        "truncated": bool(traj.turns and traj.turns[-1].truncated),
        "tool_calls": tool_calls(traj),
        "tokens": {"prompt": log.prompt_tokens, "completion": log.completion_tokens,
                   "total": log.prompt_tokens + log.completion_tokens},
        "requests": log.requests,
        "retries": log.retries,
        "error": traj.error,
        "error_kind": error_kind,
        "actions": [t.action for t in traj.turns],
        "rewards": [t.reward for t in traj.turns],
        "messages": log.messages,
        "final_observation": _jsonable(_last_text(traj.final_observation)),
        "finish_reasons": log.finish_reasons,
        "info": _jsonable(traj.turns[-1].info if traj.turns else traj.initial_info),
        "timings": {"seconds": traj.seconds, "act_seconds": [t.act_seconds for t in traj.turns],
                    "step_seconds": [t.step_seconds for t in traj.turns]},
    }


def _check_settings(out: Path, config: EvalConfig) -> None:
    settings_path = out / "run.json"
    wanted = config.scored_settings()
    if settings_path.exists():
        stored = json.loads(settings_path.read_text())
        diffs = [f"{k}: {stored.get(k)!r} there, {wanted[k]!r} now" for k in wanted if stored.get(k) != wanted[k]]
        if diffs:
            raise GemError(f"{out} holds an evaluation with other settings ({'; '.join(diffs)}); "
                           "use another --output, or --overwrite to start over")
    out.mkdir(parents=True, exist_ok=True)
    settings_path.write_text(json.dumps(wanted, indent=2) + "\n")


def _validate(config: EvalConfig, check_model: bool) -> None:
    from gem.registration import spec
    from gem.wrappers import WRAPPER_FACTORY, get_wrapper_fns

    for name, value in (("episodes", config.episodes), ("samples", config.samples),
                        ("concurrency", config.concurrency), ("max_tokens", config.max_tokens)):
        if value < 1:
            raise GemError(f"{name} must be >= 1, got {value}")
    if not config.env_ids:
        raise GemError("name at least one env id (`gem list` shows them)")
    for env_id in config.env_ids:
        spec(env_id)  # an unknown id fails here, with "Did you mean ...?", before any request
    chat_hint = "(gem eval sends chats: the history wrapper is `messages`, or a text mode such as concat_with_action)"
    try:
        get_wrapper_fns(config.wrapper_names())
    except (KeyError, ValueError) as exc:
        raise GemError(f"--wrappers {config.wrappers!r}: {exc} {chat_hint}") from None
    templated = [n for n in config.wrapper_names() if n in WRAPPER_FACTORY.tokenizer_required()]
    if templated:
        raise GemError(f"--wrappers {config.wrappers!r}: wrapper {templated[0]!r} needs a tokenizer {chat_hint}")
    if check_model:
        parse_model_spec(config.model, config.base_url)


async def aevaluate(config: EvalConfig, model: ChatModel | None = None) -> EvalResult:
    """:func:`evaluate` inside a running event loop."""
    _validate(config, check_model=model is None)
    start = time.perf_counter()
    out = config.output_dir()
    if config.overwrite:
        for name in ("episodes.jsonl", "run.json", "summary.json", "summary.md"):
            (out / name).unlink(missing_ok=True)
    _check_settings(out, config)
    store = EpisodeStore(out / "episodes.jsonl")
    records = store.load()
    wanted = [EpisodeKey(env_id, e, s) for env_id in config.env_ids
              for e in range(config.episodes) for s in range(config.samples)]
    done = {k for k in wanted if k in records and not needs_rerun(records[k])}
    own_model = model is None
    if model is None:
        model = make_model(parse_model_spec(config.model, config.base_url), api_key_env=config.api_key_env,
                           max_retries=config.max_retries, retry_backoff=config.retry_backoff,
                           request_timeout=config.request_timeout, max_model_len=config.max_model_len)
    sampling = Sampling(config.temperature, config.max_tokens, config.top_p)
    policy = ChatPolicy(model, sampling, config.system_prompt, config.seed)
    wrappers = config.wrapper_names()
    ran = 0
    try:
        for env_id in config.env_ids:
            keys = [k for k in wanted if k.env_id == env_id]
            plan = [(k, config.seed + k.episode) for k in keys if k not in done]
            finished = [records[k] for k in keys if k in done]
            bar = Progress(env_id, len(keys), len(finished), sum(bool(r["success"]) for r in finished),
                           sum(r.get("error") is not None for r in finished), enabled=config.progress)
            if not plan:
                bar.close()
                continue

            def make_env(env_id: str = env_id) -> Env:
                from gem.registration import make
                from gem.wrappers import apply_wrappers

                return apply_wrappers(make(env_id, **config.env_kwargs), wrappers)

            def on_trajectory(traj: Trajectory, plan: list[tuple[EpisodeKey, int]] = plan, bar: Progress = bar
                              ) -> None:
                nonlocal ran
                key, seed = plan[traj.episode]
                log = policy.finish(traj.episode)
                if log.fatal:
                    return  # stopped by an error that every episode would hit: nothing to record
                record = episode_record(key, seed, traj, log, model.name)
                store.append(record)
                ran += 1
                bar.update(record["success"], record["error"] is not None)

            try:
                policy.plan([key for key, _ in plan])
                await run_episodes(make_env, policy, seeds=[seed for _, seed in plan], concurrency=config.concurrency,
                                   max_turns=config.max_turns, on_error="record", on_trajectory=on_trajectory,
                                   step_timeout=config.step_timeout, episode_timeout=config.episode_timeout)
            finally:
                bar.close()
            if policy.fatal is not None:
                raise GemError(f"stopped: {policy.fatal}")
    finally:
        store.close()
        if own_model:
            model.close()
    return _report(config, out, store, wanted, ran, len(done), time.perf_counter() - start)


def _report(config: EvalConfig, out: Path, store: EpisodeStore, wanted: list[EpisodeKey], ran: int, resumed: int,
            seconds: float) -> EvalResult:
    records = store.load()
    rows = summarize([records[k] for k in wanted if k in records], config.env_ids, config.samples)
    summary = {"model": config.model, "settings": config.scored_settings(), "episodes": config.episodes,
               "samples": config.samples, "envs": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    header = (f"# gem eval: {config.model}\n\n"
              f"{config.episodes} episodes x {config.samples} samples per env, seed {config.seed}, "
              f"temperature {config.temperature}, max_tokens {config.max_tokens}, "
              f"wrappers {','.join(config.wrapper_names())}. Success rate with a 95% Wilson interval; "
              "episodes that ended in an error count as failures.\n\n")
    (out / "summary.md").write_text(header + markdown_table(rows) + "\n")
    return EvalResult(rows, out, ran, resumed, seconds)


def evaluate(config: EvalConfig, model: ChatModel | None = None) -> EvalResult:
    """Run (or resume) an evaluation and write its reports; ``model`` overrides ``config.model``
    with any object that has ``name``, ``async chat(messages, sampling)`` and ``close()``."""
    return asyncio.run(aevaluate(config, model))
