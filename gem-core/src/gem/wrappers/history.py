"""Observation wrappers that show the agent the episode so far."""

from __future__ import annotations

from collections import deque
from typing import Any

from gem.core import Env, StepResult, Wrapper

MODES = ("concat", "concat_with_action", "concat_chat", "concat_chat_on_reset", "messages", "latest")


def _line(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


class HistoryWrapper(Wrapper):
    """Turns the env's latest observation into the history of the episode.

    Modes (GEM's names, plus ``messages``):

    - ``concat``: all observations so far, one after another.
    - ``concat_with_action``: observations and the agent's actions interleaved.
    - ``concat_chat``: the interleaved history rendered with the tokenizer's chat
      template, ending with the generation prompt.
    - ``concat_chat_on_reset``: like ``concat_with_action``, with the first observation
      rendered through the chat template.
    - ``messages``: the observation is the chat message list itself
      (``[{"role": "user", "content": ...}, {"role": "assistant", ...}, ...]``), so a
      trainer applies the template once and keeps its token ids.
    - ``latest``: only the latest observation (no history), for envs whose
      ``info["suffix"]`` holds the whole state (a game's board).

    ``info["prefix"]`` / ``info["suffix"]`` from the env are put around the text
    (for ``messages``: around the last user message). In ``concat_chat``, an observation
    whose info says ``use_tool`` (a tool's output, from the tool wrapper) is a ``tool``
    message, as in the reference package. ``max_history_length`` keeps only
    the last N turns.

    >>> env = HistoryWrapper(gem.make("game:GuessTheNumber-v0-easy"), mode="concat_with_action")  # doctest: +SKIP
    """

    def __init__(
        self,
        env: Env,
        mode: str = "concat_with_action",
        tokenizer: Any = None,
        max_history_length: int | None = None,
        system_prompt: str | None = None,
    ) -> None:
        super().__init__(env)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode in ("concat_chat", "concat_chat_on_reset") and tokenizer is None:
            raise ValueError(f"mode {mode!r} needs a tokenizer with a chat template (tokenizer=...)")
        self.mode = mode
        self.tokenizer = tokenizer
        self.max_history_length = max_history_length
        self.system_prompt = system_prompt
        self.observations: deque[str] = deque(maxlen=max_history_length + 1 if max_history_length else None)
        self.actions: deque[str] = deque(maxlen=max_history_length)
        #: per observation: whether it is a tool's output (``info["use_tool"]``)
        self.from_tool: deque[bool] = deque(maxlen=self.observations.maxlen)

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, **kwargs)
        self.observations.clear()
        self.actions.clear()
        self.from_tool.clear()
        if self.mode == "concat_chat_on_reset":
            obs = self._template([{"role": "user", "content": obs}])
        self.observations.append(obs)
        self.from_tool.append(False)
        return self.render(info), info

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.actions.append(info.get("parsed_action", action) if isinstance(info, dict) else action)
        self.observations.append(obs)
        self.from_tool.append(bool(isinstance(info, dict) and info.get("use_tool")))
        return self.render(info), reward, terminated, truncated, info

    def messages(self, tool_role: bool = False) -> list[dict[str, str]]:
        """The history as chat messages (``tool_role``: tool outputs as ``tool`` messages)."""
        out = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        for i, (obs, from_tool) in enumerate(zip(self.observations, self.from_tool)):
            if i > 0:
                out.append({"role": "assistant", "content": self.actions[i - 1]})
            out.append({"role": "tool" if tool_role and from_tool else "user", "content": obs})
        return out

    def render(self, info: dict[str, Any]) -> Any:
        prefix, suffix = info.get("prefix", ""), info.get("suffix", "")
        if self.mode == "messages":
            msgs = self.messages()
            content = msgs[-1]["content"]
            msgs[-1] = {"role": "user", "content": prefix + (_line(content) + suffix if suffix else content)}
            return msgs
        if self.mode == "latest":
            latest = self.observations[-1]
            return prefix + (_line(latest) + suffix if suffix else latest)
        if self.mode == "concat_chat":
            text = self._template(self.messages(tool_role=True))
        elif self.mode == "concat":
            text = "".join(_line(o) for o in self.observations)
        else:
            text = ""
            for i, obs in enumerate(self.observations):
                if i > 0:
                    text += _line(self.actions[i - 1])
                text += _line(obs)
        return prefix + text + suffix

    def _template(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def get_wrapper_state(self) -> dict[str, Any]:
        return {"observations": list(self.observations), "actions": list(self.actions),
                "from_tool": list(self.from_tool)}

    def set_wrapper_state(self, state: dict[str, Any]) -> None:
        self.observations.clear()
        self.observations.extend(state.get("observations", []))
        self.actions.clear()
        self.actions.extend(state.get("actions", []))
        self.from_tool.clear()
        self.from_tool.extend(state.get("from_tool", [False] * len(self.observations)))


def ObservationWrapper(
    env: Env,
    include_action: bool = True,
    include_chat_template: bool = True,
    apply_chat_template_on_reset: bool = False,
    max_history_length: int | None = None,
    tokenizer: Any = None,
) -> HistoryWrapper:
    """The reference package's constructor, mapped onto :class:`HistoryWrapper` modes."""
    if include_chat_template and apply_chat_template_on_reset:
        raise ValueError("include_chat_template and apply_chat_template_on_reset cannot both be True")
    if include_chat_template and not include_action:
        raise ValueError("include_chat_template needs include_action=True")
    if include_chat_template:
        mode = "concat_chat"
    elif apply_chat_template_on_reset:
        mode = "concat_chat_on_reset"
    else:
        mode = "concat_with_action" if include_action else "concat"
    return HistoryWrapper(env, mode=mode, tokenizer=tokenizer, max_history_length=max_history_length)
