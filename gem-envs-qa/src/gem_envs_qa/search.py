"""SearchQaEnv: a QA env behind gem-tools' search tool (multi-turn: search, read, answer).

It is what the reference builds as ``gem.make("eval:HotpotQA")`` wrapped by the
``search_tool`` wrapper, packaged as one env so that it can be registered under an id,
spawned and checked like any other, and pointed at the offline corpus by default.

Each turn either calls the tool (``<search> query </search>``, or a JSON
``<tool_call>``), and the next observation is the top passages in
``<information>…</information>``; or it answers, and the QA env grades it and ends the
episode. Observations after a search hold only the results: to show the agent the whole
conversation, add a history wrapper (``wrappers=get_wrapper_fns("concat_with_action")``).

>>> env = gem.make("qa:SQuAD-search")                              # doctest: +SKIP
>>> obs, info = env.reset(idx=0)                                   # doctest: +SKIP
>>> obs, reward, done, _, info = env.step("<search> Harvard Yale Regatta </search>")  # doctest: +SKIP
>>> env.step("<answer>23 years</answer>")[1]                       # doctest: +SKIP
1.0
"""

from __future__ import annotations

from typing import Any

from gem.core import Env
from gem_envs_qa.env import QaEnv
from gem_tools.plugin import WRAPPER_PRESETS
from gem_tools.search import SearchTool
from gem_tools.wrapper import ToolEnvWrapper

_RANDOM_QUERIES = ("capital of France", "first man on the moon", "largest river", "Harvard Yale Regatta", "1998 draft")


class SearchQaEnv(ToolEnvWrapper):
    """A :class:`~gem_envs_qa.env.QaEnv` (built from ``qa_kwargs``) with a search tool.

    The tool searches, in order of precedence: ``search_url`` (a GEM / Search-R1
    retrieval server), ``corpus`` (a local JSONL corpus, indexed with BM25 once per
    process), else the offline corpus of :mod:`gem_envs_qa.corpus`; ``topk`` passages per
    query. Rewards and the tool budget follow the gem-tools wrapper preset ``preset``
    (GEM's ``search_tool``: 0.3 per search, at most 5 searches; ``search_tool_no_int_reward``:
    no reward for searching); ``tool_reward``, ``tool_success_reward``, ``max_tool_uses``
    and ``max_tool_reward_per_episode`` override it.
    """

    def __init__(
        self,
        *,
        search_url: str | None = None,
        corpus: str | None = None,
        topk: int = 3,
        preset: str = "search_tool",
        tool_reward: float | None = None,
        tool_success_reward: float | None = None,
        max_tool_uses: int | None = None,
        max_tool_reward_per_episode: float | None = None,
        **qa_kwargs: Any,
    ) -> None:
        if preset not in WRAPPER_PRESETS or WRAPPER_PRESETS[preset][0] != "search":
            searches = [name for name, (tool, _, _) in WRAPPER_PRESETS.items() if tool == "search"]
            raise ValueError(f"preset {preset!r} is not a search-tool preset; known: {', '.join(searches)}")
        wrapper_kwargs = dict(WRAPPER_PRESETS[preset][1])
        overrides = {"tool_reward": tool_reward, "tool_success_reward": tool_success_reward,
                     "max_tool_uses": max_tool_uses,
                     "max_tool_reward_per_episode": max_tool_reward_per_episode}  # fmt: skip
        wrapper_kwargs.update({k: v for k, v in overrides.items() if v is not None})
        if search_url is not None:
            tool = SearchTool(search_url=search_url, topk=topk)
        else:
            from gem_envs_qa.corpus import shared_index

            tool = SearchTool(index=shared_index(corpus), topk=topk)
        super().__init__(QaEnv(**qa_kwargs), [tool], **wrapper_kwargs)

    def sample_random_action(self) -> str:
        # half the time a search, so that random play exercises the multi-turn path
        if self.rng.random() < 0.5:
            return f"<search> {self.rng.choice(_RANDOM_QUERIES)} </search>"
        return self.env.sample_random_action()

    def spawn(self, same_state: bool = False, **overrides: Any) -> Env:
        # built from keyword arguments only, unlike a wrapper around a given env
        _, kwargs = self._init_args
        twin = type(self)(**{**kwargs, **overrides})
        twin.unwrapped.env_id, twin.unwrapped.spec = self.env_id, self.spec
        if same_state:
            twin.set_state(self.get_state())
        return twin
