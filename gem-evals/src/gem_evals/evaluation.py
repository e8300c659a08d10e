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
import contextlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gem.core import Env
from gem.errors import EpisodeTimeoutError, GemError, StepTimeoutError
from gem.fingerprint import safe_fingerprint
from gem.registration import make, spec
from gem.runner import Trajectory, run_episodes
from gem.wrappers import apply_wrappers, get_wrapper_fns, needs_tokenizer
from gem.wrappers.history import MODES as HISTORY_MODES
from gem_evals.connect import make_model
from gem_evals.metrics import markdown_table, summarize
from gem_evals.models import DEFAULT_REQUEST_TIMEOUT, ChatModel, Sampling, parse_model_spec
from gem_evals.policy import ChatPolicy, EpisodeLog
from gem_evals.progress import Progress
from gem_evals.records import EpisodeKey, EpisodeStore, needs_rerun

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
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
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
    """What a run did; ``summaries`` has one row per env (see :func:`gem_evals.metrics.summarize_env`).
    ``errors`` counts this run's episodes that ended in an error, by ``error_kind``;
    ``first_error`` is the first of them."""

    summaries: list[dict[str, Any]]
    output: Path
    ran: int
    resumed: int
    seconds: float
    errors: dict[str, int] = field(default_factory=dict)
    first_error: str | None = None


#: a run stops when this many of its first episodes all end in the same error
SAME_ERROR_STOP = 8


class _Stop(Exception):
    """Raised from the runner's ``on_trajectory`` to end a run at once (its other episodes are cancelled)."""


class FailureWatch:
    """Tells when the first episodes of a run all end in the same error and none ends
    without one: the setup is wrong (a server that is down, an env that cannot be built),
    so every later episode would end alike. Timeouts are the model's doing as often as the
    setup's and never stop a run.

    Records are held while it watches and handed on (:meth:`add` returns them) once it
    stops watching, so a run it stops leaves no episodes behind to be kept on resume.

    >>> watch = FailureWatch("game:Sudoku-v0", planned=20, first=2)
    >>> watch.add({"error": "EndpointError: refused", "error_kind": "endpoint"})
    []
    >>> watch.add({"error": "EndpointError: refused", "error_kind": "endpoint"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gem_evals.evaluation._Stop: the first 2 episodes of game:Sudoku-v0 all ended in the same error, ...
    """

    def __init__(self, env_id: str, planned: int, first: int = SAME_ERROR_STOP) -> None:
        self.env_id, self.planned = env_id, planned
        self.needed = min(first, planned)
        self.held: list[dict[str, Any]] = []

    @staticmethod
    def _reason(record: dict[str, Any]) -> tuple[Any, str] | None:
        if record.get("error") is None or record.get("error_kind") == "timeout":
            return None
        return record.get("error_kind"), re.sub(r"\d+", "N", str(record["error"]))

    def add(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """The records ready to store; raises :class:`_Stop` when the run should end."""
        if not self.needed:
            return [record]
        reason = self._reason(record)
        if reason is None or (self.held and self._reason(self.held[0]) != reason):
            self.needed, released, self.held = 0, [*self.held, record], []
            return released
        self.held.append(record)
        if len(self.held) < self.needed:
            return []
        if self.needed == self.planned:
            raise _Stop(f"all {self.needed} episodes of {self.env_id} ended in the same error: {self.held[0]['error']}")
        raise _Stop(f"the first {self.needed} episodes of {self.env_id} all ended in the same error, and the "
                    f"rest would too: {self.held[0]['error']}")

    def release(self) -> list[dict[str, Any]]:
        """What it still holds (the run ended, or was interrupted, before it decided)."""
        held, self.held, self.needed = self.held, [], 0
        return held


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
        # the env's content fingerprint (gem.fingerprint): which code, data, arguments and prompt made this episode
        "fingerprint": traj.fingerprint,
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


def _check_fingerprints(out: Path, fingerprints: dict[str, str | None]) -> None:
    """Refuse to resume into a folder whose episodes another version of an env played."""
    settings_path = out / "run.json"
    if not settings_path.exists():
        return
    stored = json.loads(settings_path.read_text()).get("fingerprints") or {}
    diffs = [f"{env_id}: {stored[env_id]} there, {now} now" for env_id, now in fingerprints.items()
             if stored.get(env_id) and now and stored[env_id] != now]
    if diffs:
        raise GemError(f"{out} holds episodes of another version of the env ({'; '.join(diffs)}: its code, data, "
                       "arguments or prompt changed); use another --output, or --overwrite to start over")


def _forget_settings(out: Path) -> None:
    """Remove what a run that recorded nothing wrote, so that a retry may use other settings."""
    (out / "run.json").unlink(missing_ok=True)
    episodes = out / "episodes.jsonl"
    if episodes.exists() and episodes.stat().st_size == 0:
        episodes.unlink()
    with contextlib.suppress(OSError):
        out.rmdir()  # only if nothing else is there


def _write_settings(out: Path, config: EvalConfig, fingerprints: dict[str, str | None]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps({**config.scored_settings(), "fingerprints": fingerprints},
                                             indent=2) + "\n")


def _validate(config: EvalConfig, check_model: bool) -> None:
    for name, value in (("episodes", config.episodes), ("samples", config.samples),
                        ("concurrency", config.concurrency), ("max_tokens", config.max_tokens)):
        if value < 1:
            raise GemError(f"{name} must be >= 1, got {value}")
    if not config.env_ids:
        raise GemError("name at least one env id (`gem list` shows them)")
    if not isinstance(config.env_kwargs, dict):
        raise GemError(f"env_kwargs must be a JSON object such as {{\"max_turns\": 5}}, got {config.env_kwargs!r}")
    for env_id in config.env_ids:
        # an unknown id, or an argument its env does not take, fails here ("Did you mean ...?"), before any request
        spec(env_id).check_kwargs(**config.env_kwargs)
    chat_hint = "(gem eval sends chats: the history wrapper is `messages`, or a text mode such as concat_with_action)"
    try:
        get_wrapper_fns(config.wrapper_names())
    except (KeyError, ValueError) as exc:
        raise GemError(f"--wrappers {config.wrappers!r}: {exc} {chat_hint}") from None
    templated = needs_tokenizer(config.wrapper_names())
    if templated:
        raise GemError(f"--wrappers {config.wrappers!r}: wrapper {templated[0]!r} needs a tokenizer {chat_hint}")
    if check_model:
        parse_model_spec(config.model, config.base_url)


def _first_env(make_env: Callable[[], Env], env_id: str) -> Env:
    """Build one env before the episodes: a constructor that fails says so once, not in every episode."""
    try:
        return make_env()
    except GemError:
        raise
    except Exception as exc:
        raise GemError(f"cannot build {env_id} ({type(exc).__name__}: {exc}); no episode was run") from exc


@dataclass
class _Tally:
    """The episodes a run stores, and its errors by kind."""

    store: EpisodeStore
    ran: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None

    def add(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.store.append(record)
            self.ran += 1
            if record["error"] is not None:
                self.errors[record["error_kind"] or "env"] += 1
                self.first_error = self.first_error or record["error"]


def _builder(config: EvalConfig, env_id: str) -> Callable[[], Env]:
    wrappers = config.wrapper_names()

    def build() -> Env:
        return apply_wrappers(make(env_id, **config.env_kwargs), wrappers)

    return build


async def _run_env(config: EvalConfig, env_id: str, plan: list[tuple[EpisodeKey, int]], bar: Progress,
                   policy: ChatPolicy, model_name: str, tally: _Tally, first: Env) -> None:
    """Play the planned episodes of one env (``first``: its first env, built already); raises :class:`GemError`
    when the run must stop."""
    build = _builder(config, env_id)
    built = [first]  # the runner's first env

    def make_env() -> Env:
        return built.pop() if built else build()

    watch = FailureWatch(env_id, len(plan))

    def on_trajectory(traj: Trajectory) -> None:
        key, seed = plan[traj.episode]
        log = policy.finish(traj.episode)
        if log.fatal:
            raise _Stop(str(policy.fatal))  # every other request would fail alike: nothing to record
        record = episode_record(key, seed, traj, log, model_name)
        bar.update(record["success"], record["error"] is not None)
        tally.add(watch.add(record))

    stopped: str | None = None
    try:
        policy.plan([key for key, _ in plan])
        await run_episodes(make_env, policy, seeds=[seed for _, seed in plan], concurrency=config.concurrency,
                           max_turns=config.max_turns, on_error="record", on_trajectory=on_trajectory,
                           step_timeout=config.step_timeout, episode_timeout=config.episode_timeout)
    except _Stop as stop:
        stopped = str(stop)
    finally:
        for env in built:  # the run ended before it needed the first env
            env.close()
        if stopped is None:
            tally.add(watch.release())  # an interrupted run keeps what it finished
    if policy.fatal is not None:
        raise GemError(f"stopped: {policy.fatal}")
    if stopped is not None:
        raise GemError(f"stopped: {stopped}. Fix the cause and run the same command again (nothing was "
                       "recorded for these episodes)")


async def aevaluate(config: EvalConfig, model: ChatModel | None = None) -> EvalResult:
    """:func:`evaluate` inside a running event loop."""
    _validate(config, check_model=model is None)
    start = time.perf_counter()
    out = config.output_dir()
    if config.overwrite:
        for name in ("episodes.jsonl", "run.json", "summary.json", "summary.md"):
            (out / name).unlink(missing_ok=True)
    _check_settings(out, config)
    # each env built once before any episode: a constructor that fails says so now, and the fingerprints are
    # checked against a folder being resumed
    firsts: dict[str, Env] = {}
    try:
        for env_id in config.env_ids:
            firsts[env_id] = _first_env(_builder(config, env_id), env_id)
        fingerprints = {env_id: safe_fingerprint(env) for env_id, env in firsts.items()}
        _check_fingerprints(out, fingerprints)
    except BaseException:
        for env in firsts.values():
            env.close()
        raise
    store = EpisodeStore(out / "episodes.jsonl")
    records = store.load()
    wanted = [EpisodeKey(env_id, e, s) for env_id in config.env_ids
              for e in range(config.episodes) for s in range(config.samples)]
    done = {k for k in wanted if k in records and not needs_rerun(records[k])}
    own_model = model is None
    if model is None:
        try:
            model = make_model(parse_model_spec(config.model, config.base_url), api_key_env=config.api_key_env,
                               max_retries=config.max_retries, retry_backoff=config.retry_backoff,
                               request_timeout=config.request_timeout, max_model_len=config.max_model_len)
        except BaseException:
            for env in firsts.values():
                env.close()
            raise
    sampling = Sampling(config.temperature, config.max_tokens, config.top_p)
    policy = ChatPolicy(model, sampling, config.system_prompt, config.seed)
    tally = _Tally(store)
    completed = False
    try:
        _write_settings(out, config, fingerprints)  # once the model is up: a run that never started leaves no folder
        for env_id in config.env_ids:
            keys = [k for k in wanted if k.env_id == env_id]
            plan = [(k, config.seed + k.episode) for k in keys if k not in done]
            finished = [records[k] for k in keys if k in done]
            bar = Progress(env_id, len(keys), len(finished), sum(bool(r["success"]) for r in finished),
                           sum(r.get("error") is not None for r in finished), enabled=config.progress)
            try:
                if plan:
                    await _run_env(config, env_id, plan, bar, policy, model.name, tally, firsts.pop(env_id))
            finally:
                bar.close()
        completed = True
    finally:
        for env in firsts.values():  # envs whose episodes were done already, or that a stop left unplayed
            env.close()
        store.close()
        if own_model:
            model.close()
        if not completed and not records and tally.ran == 0:
            _forget_settings(out)  # a run that stopped before recording anything must not bind a retry to its settings
    return _report(config, out, store, wanted, tally, len(done), time.perf_counter() - start)


def _report(config: EvalConfig, out: Path, store: EpisodeStore, wanted: list[EpisodeKey], tally: _Tally,
            resumed: int, seconds: float) -> EvalResult:
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
    return EvalResult(rows, out, tally.ran, resumed, seconds, dict(tally.errors), tally.first_error)


def evaluate(config: EvalConfig, model: ChatModel | None = None) -> EvalResult:
    """Run (or resume) an evaluation and write its reports; ``model`` overrides ``config.model``
    with any object that has ``name``, ``async chat(messages, sampling)`` and ``close()``."""
    return asyncio.run(aevaluate(config, model))
