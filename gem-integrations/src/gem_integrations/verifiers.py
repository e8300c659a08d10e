"""GEM envs as Prime Intellect verifiers environments (tested with verifiers 0.4.0), the
stack that ``vf-eval`` scores and prime-rl trains on.

In verifiers 0.4.0 an environment is a taskset (the rows) plus an ``Env`` whose ``run``
says how one task becomes one episode. This module is such a plugin package: it
exports :class:`GemTaskset` (one task per reset seed, its prompt the env's first
observation for that seed) and :class:`GemEnv`, which resets a fresh GEM env with the
task's seed and plays it against the model turn by turn through verifiers' own
``Interaction`` (the game plays the user: each reply is a ``step``, each observation the
next user turn). The episode's return is recorded on the trace as the reward
``env_return``, so verifiers' scoring, and prime-rl's advantages, see the env's returns.
All rollouts of one task start from the same state: the seed rides on the task.

From the command line (the taskset id ``gem_verifiers`` is this module)::

    PYTHONPATH=examples/verifiers vf-eval gem_verifiers --env.taskset.env-id game:GuessTheNumber-v0-easy -n 8 -r 4 \\
        --model MODEL --client.base-url http://127.0.0.1:8000/v1 --no-push

From Python, :func:`load_environment` builds the verifiers env for a GEM id.

The other way, :class:`VerifiersEnv` is a verifiers environment as a GEM env, and
``gem.make("vf:<taskset id>")`` builds one (this package's plugin registers the ``vf:`` id family; the
id's name is what verifiers' own loader imports), so GEM's runner, ``gem eval`` and
gem-train play verifiers environments::

    env = gem.make("vf:my_taskset", taskset_args={...})   # or: gem eval vf:my_taskset --model ...
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

from gem.core import Env
from gem.errors import StepTimeoutError
from gem.host.hosted import DEFAULT_STEP_TIMEOUT, HostedEnv
from gem_integrations._support import import_framework, require_hook

TESTED = "0.4.0"

import_framework("verifiers.v1", dist="verifiers", extra="verifiers", tested=TESTED)
import verifiers.v1 as vf  # noqa: E402  (after the guarded import above)
from pydantic import Field  # noqa: E402  (verifiers depends on it)

require_hook(all(hasattr(vf, name) for name in ("Env", "Taskset", "TasksetConfig", "TaskData", "EnvConfig",
                                                "AgentConfig", "SubprocessConfig", "load_environment")),
             dist="verifiers", tested=TESTED, extra="verifiers",
             what="verifiers.v1 lacks Env / Taskset / TasksetConfig / TaskData / EnvConfig / load_environment")
require_hook(hasattr(vf.Agent, "interaction"), dist="verifiers", tested=TESTED, extra="verifiers",
             what="verifiers.v1.Agent has no interaction() (the turn-by-turn exchange GemEnv plays through)")

#: the taskset id verifiers imports this module by: verifiers resolves an id to a top-level module (a dotted
#: one makes it look for a package ``verifiers.v1.tasksets.gem``), so this module is that module in-process
#: too; for ``vf-eval``, examples/verifiers/gem_verifiers.py is the file on PYTHONPATH that re-exports it
TASKSET_ID = "gem_verifiers"
sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])
#: the reward name the episode's return is recorded under
REWARD = "env_return"


class GemTasksetConfig(vf.TasksetConfig):
    """Which GEM env to play, and on which reset seeds (``--env.taskset.*`` on the CLI)."""

    env_id: str = "game:GuessTheNumber-v0-easy"
    """The GEM env id (``gem list`` shows them)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for ``gem.make``."""
    num_tasks: int = 100
    """How many tasks: task i resets the env with seed ``seed + i``."""
    seed: int = 0
    """The first reset seed."""


class GemTaskData(vf.TaskData):
    env_id: str
    env_kwargs: dict[str, Any]
    seed: int
    """The reset seed every rollout of this task starts from."""


class GemTask(vf.Task[GemTaskData, vf.State, vf.TaskConfig]):
    pass


class GemTaskset(vf.Taskset[GemTask, GemTasksetConfig]):
    """One task per seed; its prompt is the env's first observation for that seed."""

    def load(self) -> Iterator[GemTask]:
        import gem

        config = self.config
        for i in range(config.num_tasks):
            seed = config.seed + i
            env = gem.make(config.env_id, **config.env_kwargs)
            try:
                obs, _ = env.reset(seed=seed)
            finally:
                env.close()
            data = GemTaskData(name=f"{config.env_id}#{seed}", prompt=str(obs), env_id=config.env_id,
                               env_kwargs=dict(config.env_kwargs), seed=seed)
            yield GemTask(data, config.task)


def _chat_agent() -> vf.AgentConfig:
    # the plain chat loop (no tools, no code execution) in a local process: a GEM env's
    # actions are the model's replies
    return vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig())


class GemEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = _chat_agent()
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT
    """Seconds a GEM reset or step may take; one that raises or runs longer ends that episode
    (``trace.info["env_failure"]`` names the cause) and the other episodes go on."""


class GemEnv(vf.Env[GemEnvConfig]):
    """Plays one GEM episode per verifiers episode: reset with the task's seed, then each
    reply of the model is one ``step`` and each observation the next user turn."""

    async def run(self, task: GemTask, agents: Any) -> None:
        data = task.data
        # behind the host, in a thread of its own (not GEM's executor pool, which serves one event loop: this
        # may be a second loop of the process, a GEM env playing this verifiers env through vf:gem_verifiers)
        env = HostedEnv(data.env_id, step_timeout=self.config.step_timeout, **data.env_kwargs)
        total, turns, done = 0.0, 0, False
        try:
            await env.areset(seed=data.seed)
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()
                while not segment.terminated and env.failure is None:
                    obs, reward, terminated, truncated, _ = await env.astep(segment.last_reply)
                    total += float(reward)
                    turns += 1
                    done = bool(terminated or truncated)
                    if done:
                        break
                    segment = await interaction.turn(str(obs))
        finally:
            env.close()
        trace = interaction.trace
        trace.record_reward(REWARD, total, 1.0)
        trace.info["env_turns"] = turns
        trace.info["env_done"] = done
        if env.failure is not None:
            trace.info["env_failure"] = env.failure


def load_environment(env_id: str = "game:GuessTheNumber-v0-easy", *, num_tasks: int = 100, seed: int = 0,
                     env_kwargs: dict[str, Any] | None = None, player: dict[str, Any] | None = None) -> GemEnv:
    """The verifiers env that plays GEM's ``env_id`` on seeds ``seed .. seed + num_tasks - 1``.

    ``player`` overrides fields of the agent's config (e.g. ``{"max_turns": 8}``).
    """
    taskset = GemTasksetConfig(id=TASKSET_ID, env_id=env_id, num_tasks=num_tasks, seed=seed,
                               env_kwargs=dict(env_kwargs or {}))
    agent = _chat_agent().model_copy(update=dict(player or {}))
    return vf.load_environment(GemEnvConfig(taskset=taskset, player=agent))


async def play(env: GemEnv, model: str, base_url: str, *, num_tasks: int | None = None, rollouts: int = 1,
               api_key_var: str = "OPENAI_API_KEY") -> list[Any]:
    """Roll out ``rollouts`` episodes of each of the env's first ``num_tasks`` tasks against an
    OpenAI-compatible endpoint, through verifiers' own episode runner (``Env.run_slot``, as
    ``vf-eval`` runs it); returns verifiers' ``Episode`` objects, task by task."""
    from verifiers.v1.clients import ModelContext
    from verifiers.v1.configs.client import EvalClientConfig

    os.environ.setdefault(api_key_var, "unused")  # a local endpoint needs no key, but the client reads one
    taskset = env.taskset if num_tasks is None else env.taskset.take(num_tasks)
    ctx = ModelContext(model=model, client=EvalClientConfig(base_url=base_url, api_key_var=api_key_var))
    async with env.serving():
        slots = [slot for task in taskset for slot in env.slots(task, rollouts)]
        return list(await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots)))


# -- the other direction: a verifiers environment as a GEM env --------------------------------------


class _Bridge:
    """The "model endpoint" a verifiers episode talks to when GEM's caller is the model: each chat
    request verifiers' harness sends waits in ``events`` until :meth:`VerifiersEnv.step` answers it.

    It listens on loopback, where any local process can reach it, so a request counts only with the
    bridge's unguessable key (``Authorization: Bearer``, handed to verifiers as its API key through the
    environment variable :attr:`key_var`) and the model name of an episode in play (a random tag per
    episode, :meth:`open_episode`); anything else is answered 401 and never reaches an episode. A request
    waits at most ``answer_timeout`` seconds for its answer (504 after that)."""

    def __init__(self, answer_timeout: float) -> None:
        import queue
        import secrets
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        #: ("ask", messages, answer queue, model) per request; ("done", future, None, None) per episode
        self.events: queue.Queue[tuple[str, Any, Any, Any]] = queue.Queue()
        self.key = secrets.token_urlsafe(32)
        #: the environment variable verifiers' client reads the key from (one per bridge: a process may hold many)
        self.key_var = f"{_BRIDGE_KEY}_{secrets.token_hex(8).upper()}"
        os.environ[self.key_var] = self.key
        self.answer_timeout = answer_timeout
        self._tags: set[str] = set()
        self._tags_lock = threading.Lock()
        bridge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if not bridge.authorised(self.headers.get("Authorization")):
                    self._refuse()
                    return
                self._send(200, "application/json", json.dumps({"object": "list", "data": [{"id": "gem"}]}).encode())

            def do_POST(self) -> None:
                try:
                    size = min(int(self.headers.get("Content-Length", 0)), _MAX_REQUEST_BYTES)
                    body = json.loads(self.rfile.read(size) or b"{}")
                except ValueError:
                    body = None
                if not isinstance(body, dict) or not bridge.authorised(self.headers.get("Authorization"),
                                                                       body.get("model")):
                    self._refuse()
                    return
                answer: queue.Queue[str | None] = queue.Queue(maxsize=1)
                bridge.events.put(("ask", body.get("messages") or [], answer, body.get("model")))
                try:
                    reply = answer.get(timeout=bridge.answer_timeout)
                except queue.Empty:
                    self._error(504, f"no answer from GEM's caller within {bridge.answer_timeout:g} s")
                    return
                if reply is None:  # the episode was abandoned (a new reset, or close)
                    self._error(503, "episode abandoned")
                    return
                self._send(200, *_completion(reply, bool(body.get("stream")), body.get("model")))

            def _refuse(self) -> None:
                self._error(401, "not a request of this bridge's episode (key or model tag)")

            def _error(self, status: int, message: str) -> None:
                self._send(status, "application/json", json.dumps({"error": {"message": message}}).encode())

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="gem-vf-bridge").start()

    def authorised(self, header: str | None, model: Any = None) -> bool:
        """Whether a request carries this bridge's key and (for a chat request) a live episode's tag."""
        import hmac

        given = (header or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), self.key.encode()):
            return False
        if model is None:
            return True
        with self._tags_lock:
            return isinstance(model, str) and model in self._tags

    def open_episode(self) -> str:
        """A new episode's tag (the model name its requests carry); the episodes before it are over."""
        import secrets

        tag = f"gem-episode-{secrets.token_hex(16)}"
        with self._tags_lock:
            self._tags = {tag}
        return tag

    def close_episodes(self) -> None:
        with self._tags_lock:
            self._tags = set()

    def close(self) -> None:
        self.close_episodes()
        self.server.shutdown()
        self.server.server_close()
        os.environ.pop(self.key_var, None)


def _completion(reply: str, stream: bool, model: Any) -> tuple[str, bytes]:
    """A chat completion holding ``reply``, as one JSON body or as an SSE stream."""
    if not stream:
        return "application/json", json.dumps({
            "id": "gem", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        }).encode()
    chunk = {"id": "gem", "object": "chat.completion.chunk", "model": model}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply},
                                     "finish_reason": None}]},
              {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    return "text/event-stream", b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _new_turn(messages: list[dict[str, Any]]) -> str:
    """What the model has not seen yet: the messages after its last reply (the prompt, at first)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return "\n\n".join(_text(m.get("content")) for m in messages[last + 1:]
                        if m.get("role") in ("user", "tool") and _text(m.get("content")))


_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _verifiers_loop() -> asyncio.AbstractEventLoop:
    """The one event loop (in a daemon thread) that runs every VerifiersEnv's episodes of this process, as
    ``vf-eval`` runs all of its rollouts in one loop: with a loop per env, concurrent episodes hung."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, daemon=True, name="gem-verifiers-loop").start()
        return _loop


class VerifiersEnv(Env):
    """A verifiers 0.4.0 environment (a taskset plugin, and optionally its ``vf.Env``) as a GEM env.

    ``reset(seed)`` starts one verifiers episode of task ``seed`` (modulo the taskset's size)
    with verifiers' own runner; the episode's model is GEM's caller: each request the chat
    harness makes returns as an observation, and ``step(action)`` is the model's reply. When
    verifiers ends the episode, its scoring has run and the last step's reward is the episode's
    reward (the taskset's ``@vf.reward`` functions, weighted as verifiers weighs them);
    ``info["rewards"]`` holds each of them. ``gem.make("vf:<taskset>")`` builds one.

    ``env``: a verifiers env id (default: the taskset's own). ``taskset_args``: fields of the
    taskset's config. ``player``: fields of each agent's config (default: the chat harness
    ``null`` in a local process). ``step_timeout``: seconds a step waits for verifiers.
    """

    def __init__(self, taskset: str, env: str = "", taskset_args: dict[str, Any] | None = None,
                 player: dict[str, Any] | None = None, step_timeout: float = 600.0) -> None:
        from verifiers.v1.configs.agent import agent_config_fields
        from verifiers.v1.utils.loaders import env_config_type

        config_type = env_config_type(taskset, env)
        config = config_type.model_validate({"id": env, "taskset": {**(taskset_args or {}), "id": taskset}})
        seats = {name: _chat_agent().model_copy(update=dict(player or {})) for name in agent_config_fields(config)}
        self.vf_env = vf.load_environment(config.model_copy(update=seats))
        taskset_view = self.vf_env.taskset
        self._tasks = list(taskset_view) if taskset_view.bounded else None
        if self._tasks == []:
            raise ValueError(f"verifiers taskset {taskset!r} has no tasks")
        self.step_timeout = step_timeout
        self._bridge: _Bridge | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_serving: asyncio.Event | None = None
        self._episode: Any = None
        self._answer: Any = None
        self._count, self._tag = 0, ""

    def _start(self) -> None:
        """The bridge, and the verifiers env's serving resources held in the shared verifiers loop."""
        self._bridge = _Bridge(answer_timeout=self.step_timeout)
        self._loop = _verifiers_loop()
        ready = threading.Event()

        async def serve() -> None:
            self._stop_serving = asyncio.Event()
            async with self.vf_env.serving():
                ready.set()
                await self._stop_serving.wait()

        self._serving = asyncio.run_coroutine_threadsafe(serve(), self._loop)
        if not ready.wait(timeout=self.step_timeout):
            raise StepTimeoutError(f"the verifiers env did not start serving within {self.step_timeout:g} s "
                                   "(VerifiersEnv step_timeout)")

    def _task(self, index: int) -> Any:
        if self._tasks is not None:
            return self._tasks[index % len(self._tasks)]
        return next(iter(self.vf_env.taskset.skip(index).take(1)))

    def _abandon(self) -> None:
        if self._bridge is not None:
            self._bridge.close_episodes()
        if self._answer is not None:
            self._answer.put(None)
            self._answer = None
        if self._episode is not None:
            self._episode.cancel()
            self._episode = None

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        from verifiers.v1.clients import ModelContext
        from verifiers.v1.configs.client import EvalClientConfig
        from verifiers.v1.env import RunSlot

        if self._bridge is None:
            self._start()
        self._abandon()
        index = seed if seed is not None else self.rng.randrange(2**31)
        task = self._task(index)
        self._count += 1
        # an unguessable tag per episode, as the model name: it tells this episode's requests from stale ones and
        # from any other local client's; the bridge's key goes to verifiers as its API key
        self._tag = self._bridge.open_episode()
        ctx = ModelContext(model=self._tag, client=EvalClientConfig(base_url=self._bridge.base_url,
                                                                api_key_var=self._bridge.key_var))
        events = self._bridge.events
        episode = asyncio.run_coroutine_threadsafe(self.vf_env.run_slot(RunSlot(task), ctx), self._loop)
        episode.add_done_callback(lambda fut: events.put(("done", fut, None, None)))
        self._episode = episode
        obs, _, done, info = self._next()
        if done:
            raise RuntimeError(f"verifiers ended task {task.data.name or index} before asking the model: "
                               f"{info.get('errors')}")
        return obs, {"task": task.data.name, "task_index": index}

    def _next(self) -> tuple[str, float, bool, dict[str, Any]]:
        """Wait for this episode's next request (an observation) or its end (the reward)."""
        import queue

        while True:
            try:
                kind, payload, answer, model = self._bridge.events.get(timeout=self.step_timeout)
            except queue.Empty:
                raise StepTimeoutError(f"the verifiers episode neither asked the model nor ended within "
                                       f"{self.step_timeout:g} s (VerifiersEnv step_timeout)") from None
            if kind == "ask" and model == self._tag:
                self._answer = answer
                return _new_turn(payload), 0.0, False, {}
            if kind == "ask":
                answer.put(None)  # a request of an abandoned episode
            elif payload is self._episode:
                break
        self._episode = None
        if payload.cancelled():
            return "", 0.0, True, {"errors": ["cancelled"]}
        episode = payload.result()
        rewards = {name: r.score for trace in episode.traces for name, r in trace.rewards.items() if r is not None}
        total = sum(trace.reward for trace in episode.traces)
        errors = [f"{e.type}: {e.message}" for e in episode.errors]
        errors += [f"{e.type}: {e.message}" for trace in episode.traces for e in trace.errors]
        return "", float(total), True, {"rewards": rewards, "ok": episode.ok, "errors": errors}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._answer is None:
            return "", 0.0, True, False, {"errors": ["the episode is over; call reset()"]}
        answer, self._answer = self._answer, None
        answer.put(str(action))
        obs, reward, done, info = self._next()
        return obs, reward, done, False, info

    def close(self) -> None:
        self._abandon()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop_serving.set)
            try:
                self._serving.result(timeout=60)
            finally:
                self._loop = None
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None


#: the prefix of the variable each bridge's client reads its key from
_BRIDGE_KEY = "GEM_VERIFIERS_BRIDGE_KEY"
#: the largest chat request the bridge reads
_MAX_REQUEST_BYTES = 64 << 20


__all__ = ["GemEnv", "GemEnvConfig", "GemTask", "GemTaskData", "GemTaskset", "GemTasksetConfig", "VerifiersEnv",
           "load_environment", "play"]
