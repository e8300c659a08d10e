"""The policy ``gem eval`` hands to gem's runner: observations become chats for a model.

The runner calls ``act(observation, context)`` once per turn of each episode. With the
``messages`` wrapper the observation is the whole conversation so far; the policy puts
the system prompt in front, sends it, and keeps per episode (``context.index``) what the
report needs: tokens, requests, retries, the last chat.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from gem.runner import EpisodeContext
from gem_evals.models import ChatModel, EndpointError, Sampling
from gem_evals.records import EpisodeKey


def request_seed(base_seed: int, key: EpisodeKey, turn: int) -> int:
    """A sampling seed per (episode, sample, turn): samples of one episode differ, reruns repeat."""
    return zlib.crc32(f"{base_seed}|{key.env_id}|{key.episode}|{key.sample}|{turn}".encode())


@dataclass
class EpisodeLog:
    """What one episode cost and what its last request was."""

    key: EpisodeKey
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    # the last chat sent, followed by the model's answer
    messages: list[dict[str, str]] = field(default_factory=list)
    # "endpoint": no answer after the retries (rerun on resume); "request": the request was refused
    error_kind: str | None = None
    fatal: bool = False


class ChatPolicy:
    """``act(observation, context) -> str`` for :func:`gem.runner.run_episodes`, talking to ``model``.

    :meth:`plan` names the episode behind each runner index; the runner's
    :class:`~gem.runner.EpisodeContext` tells ``act`` which one is asking, and
    :meth:`finish` (from the runner's ``on_trajectory``) hands over its log.

    >>> policy = ChatPolicy(model, Sampling(max_tokens=64), system_prompt="Be brief.")  # doctest: +SKIP
    """

    def __init__(self, model: ChatModel, sampling: Sampling, system_prompt: str | None = None,
                 base_seed: int = 0) -> None:
        self.model, self.sampling = model, sampling
        self.system_prompt, self.base_seed = system_prompt, base_seed
        self._keys: list[EpisodeKey] = []
        self._logs: dict[int, EpisodeLog] = {}
        self.answered = 0
        # set by an error every other request would hit too (wrong key, model, URL): later turns stop at once
        self.fatal: EndpointError | None = None

    def plan(self, keys: list[EpisodeKey]) -> None:
        """The episodes of the next run: runner index ``i`` plays ``keys[i]``."""
        self._keys, self._logs = list(keys), {}

    def _log(self, index: int) -> EpisodeLog:
        return self._logs.setdefault(index, EpisodeLog(self._keys[index]))

    def finish(self, index: int) -> EpisodeLog:
        """The log of runner episode ``index`` (empty if it never asked for an action)."""
        log = self._log(index)
        del self._logs[index]
        return log

    def chat(self, observation: Any) -> list[dict[str, str]]:
        """The messages to send for ``observation`` (a message list, or text as one user message)."""
        if isinstance(observation, list):
            messages = [dict(m) for m in observation]
        else:
            messages = [{"role": "user", "content": str(observation)}]
        if self.system_prompt and not (messages and messages[0].get("role") == "system"):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    async def act(self, observation: Any, context: EpisodeContext) -> str:
        log = self._log(context.index)
        if self.fatal is not None:
            log.fatal = True
            raise self.fatal
        messages = self.chat(observation)
        sampling = Sampling(self.sampling.temperature, self.sampling.max_tokens, self.sampling.top_p,
                            request_seed(self.base_seed, log.key, log.requests))
        try:
            completion = await self.model.chat(messages, sampling)
        except EndpointError as exc:
            log.retries += exc.retries
            log.error_kind = "endpoint" if exc.retryable else "request"
            # a refused request before any answer at all is a setting the endpoint rejects, not one episode's
            if exc.fatal or (not exc.retryable and self.answered == 0):
                log.fatal = True
                self.fatal = self.fatal or exc
            raise
        self.answered += 1
        log.requests += 1
        log.retries += completion.retries
        log.prompt_tokens += completion.prompt_tokens
        log.completion_tokens += completion.completion_tokens
        log.finish_reasons.append(completion.finish_reason)
        log.messages = [*messages, {"role": "assistant", "content": completion.text}]
        return completion.text
