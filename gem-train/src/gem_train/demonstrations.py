"""Demonstration episodes for the SFT warm start: a scripted policy (such as the games
suite's solvers), optionally made noisy, played through the same wrappers and chat
template as RL, so the warm start trains on exactly the prompts RL will see.

>>> samples, stats = demonstrations(make_env, solver_for, tokenizer, range(64), noise=0.3)  # doctest: +SKIP
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from importlib import import_module
from typing import Any

from gem_train.rollout import TurnSample, encode_prompt


class AnswerOracle:
    """Answers ``\\boxed{<the env's reference answer>}``: a teacher for envs that keep their answer as
    ``answer`` once reset (the math suite's envs). It reads the answer, so it is for warm starts only."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self) -> None:
        pass

    def reference(self) -> str:
        """The env's reference answer for the current episode."""
        answer = getattr(self.env.unwrapped, "answer", None)
        if answer is None:
            raise ValueError(f"env.demonstrator=answer needs an env that keeps its reference answer as `answer`; "
                             f"{type(self.env.unwrapped).__name__} has none")
        if isinstance(answer, (list, tuple)) and answer:  # QA: aliases, the first is the canonical one
            answer = answer[0]
        return str(answer)

    def act(self, observation: str) -> str:
        return answer_in_format(self.reference(), observation)


def answer_in_format(answer: str, prompt: str) -> str:
    """``answer`` as the env asks for it: ``<answer>...</answer>`` where the prompt says so (the QA suite), else
    ``\\boxed{...}`` (math, reasoning-gym).

    >>> answer_in_format("Paris", "Then, provide your final answer using: <answer> your answer here </answer>")
    '<answer>Paris</answer>'
    """
    if "<answer>" in prompt and "\\boxed" not in prompt:
        return f"<answer>{answer}</answer>"
    return f"\\boxed{{{answer}}}"


class SolutionOracle:
    """Plays the env's own solution: the actions of ``env.solution()`` in turn (the terminal suite's tasks), or
    a code problem's reference program in a python block (the code suite's ``problem.meta["canonical"]``)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.actions: list[str] = []

    def reset(self) -> None:
        base = self.env.unwrapped
        solution = getattr(base, "solution", None)
        if callable(solution):
            self.actions = list(solution())
            return
        canonical = getattr(getattr(base, "problem", None), "meta", {}).get("canonical")
        if canonical is None:
            raise ValueError(f"env.demonstrator=solution needs an env with solution() (terminal tasks) or a code "
                             f"problem with a reference program; {type(base).__name__} has neither")
        self.actions = [f"```python\n{canonical.strip()}\n```"]

    def act(self, observation: str) -> str:
        # a multi-turn code env asks again after a failed test: the reference program is the answer again
        return self.actions.pop(0) if len(self.actions) > 1 else self.actions[0]


class ScriptedSeat:
    """Plays the learning seat of a multi-agent game (gem's ``OpponentEnv``) as the game's own scripted
    ``"solver"`` player would (e.g. minimax in Tic-Tac-Toe): the ``solver`` demonstrator of ``multi:`` ids."""

    def __init__(self, env: Any) -> None:
        base = env.unwrapped
        game = getattr(base, "game", None)
        if game is None or "solver" not in getattr(game, "scripted_players", ()):
            raise KeyError(f"{type(base).__name__} is no multi-agent game with a scripted solver player")
        self.env = base

    def reset(self) -> None:
        pass

    def act(self, observation: str) -> str:
        return str(self.env.game.scripted_action(self.env.seat, "solver"))


def _solver(env: Any) -> Any:
    """The games suite's solver for a ``game:`` env, else a multi-agent game's scripted solver."""
    if getattr(env.unwrapped, "game", None) is not None:
        return ScriptedSeat(env)
    try:
        from gem_envs_games.solvers import solver_for
    except ImportError as exc:
        raise ImportError(
            "env.demonstrator=solver needs the games suite (pip install gem-envs-games), "
            "or set env.demonstrator=module:factory, or trainer.sft.episodes=0"
        ) from exc
    return solver_for(env)


def tool_names(env: Any) -> list[str]:
    """Names of the tools a tool wrapper (gem-tools' ``ToolEnvWrapper``) in ``env``'s wrapper chain offers."""
    while env is not None:
        tools = getattr(env, "tools", None)
        if isinstance(tools, list):
            return [str(getattr(tool, "name", "")) for tool in tools]
        env = getattr(env, "env", None)
    return []


#: what the python tool puts before a program's output (gem-tools' PythonCodeTool)
_RESULT = "Code execution result:"


class ToolAnswerOracle(AnswerOracle):
    """A tool-using teacher: its first reply calls the env's tool, its last answers from what the tool said.

    Behind the python tool it writes a program that prints the reference answer, then boxes the
    program's output (so the answer it gives is the one the tool returned, and the warm start learns to
    call the tool and read its result); behind the search tool it searches for the question, then gives
    the reference answer, each in the format the env asks for (:func:`answer_in_format`). Like
    :class:`AnswerOracle` it reads the answer: for warm starts only."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        tools = tool_names(env)
        if "python" in tools:
            self.tool = "python"
        elif "search" in tools:
            self.tool = "search"
        else:
            raise ValueError(f"env.demonstrator=tool_answer needs a python or search tool wrapper in env.wrappers "
                             f"(python_tool, search_tool, ...); this env's tools: {tools or 'none'}")
        self.prompt: str | None = None

    def reset(self) -> None:
        self.prompt = None

    def act(self, observation: str) -> str:
        answer = self.reference()
        if self.prompt is None:
            self.prompt = observation
            if self.tool == "python":
                return f"<python>\nprint({answer!r})\n</python>"
            question = re.search(r"Question:\s*(.+)", observation)
            return f"<search>{(question.group(1) if question else answer).strip()[:200]}</search>"
        if self.tool == "python" and _RESULT in observation:
            printed = observation.split(_RESULT, 1)[1].strip()
            if printed:
                answer = printed.splitlines()[-1].strip()
        return answer_in_format(answer, self.prompt)


def demonstrator_factory(spec: str) -> Callable[[Any], Any]:
    """``"solver"`` (the games suite's ``solver_for``), ``"answer"`` (:class:`AnswerOracle`), ``"tool_answer"``
    (:class:`ToolAnswerOracle`), ``"solution"`` (:class:`SolutionOracle`) or ``"module:factory"``;
    factory(env) -> demonstrator."""
    if spec == "answer":
        return AnswerOracle
    if spec == "tool_answer":
        return ToolAnswerOracle
    if spec == "solution":
        return SolutionOracle
    if spec == "solver":
        return _solver
    module, sep, name = spec.partition(":")
    if not sep:
        raise ValueError(f"env.demonstrator must be 'solver' or 'module:factory', got {spec!r}")
    return getattr(import_module(module), name)


def _latest_text(observation: Any) -> str:
    # a demonstrator reads what the env just said, not the history a wrapper built around it
    if isinstance(observation, list):
        return str(observation[-1]["content"])
    return str(observation)


def demonstrations(
    make_env: Callable[[], Any],
    make_demonstrator: Callable[[Any], Any],
    tokenizer: Any,
    seeds: Iterable[int],
    noise: float = 0.0,
    format_noise: float = 0.0,
    templated: bool = False,
    max_model_len: int = 1024,
    max_turns: int | None = None,
    seed: int = 0,
) -> tuple[list[TurnSample], dict[str, float]]:
    """Play the demonstrator on ``seeds``; every turn becomes a prompt (chat-templated as in
    RL) and a response (the action's tokens then eos). With probability ``noise`` an action
    is the env's ``sample_random_action()`` instead, and with probability ``format_noise``
    it is cut to half its length (malformed, in any env that parses its actions).

    A demonstrator that cannot go on from a state a noisy action made (a Sokoban box pushed into a
    corner) raises ``ValueError``: that episode ends there, its turns so far kept, and is counted in
    ``demo_abandoned``. The same error in an episode with no noisy action is raised."""
    rng = random.Random(seed)
    env = make_env()
    demonstrator = make_demonstrator(env)
    samples: list[TurnSample] = []
    returns, successes, episodes, abandoned = 0.0, 0, 0, 0
    try:
        for s in seeds:
            obs, _ = env.reset(seed=s)
            demonstrator.reset()
            turn, noisy = 0, False
            while max_turns is None or turn < max_turns:
                try:
                    action = demonstrator.act(_latest_text(obs))
                except ValueError:
                    if not noisy:
                        raise
                    abandoned += 1
                    break
                if rng.random() < noise:
                    action, noisy = env.sample_random_action(), True
                if rng.random() < format_noise:
                    action, noisy = action[: len(action) // 2], True
                prompt = encode_prompt(tokenizer, obs, templated)
                response = tokenizer(action, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                obs, reward, terminated, truncated, info = env.step(action)
                if len(prompt) + len(response) <= max_model_len:
                    samples.append(TurnSample(prompt, response, [], "stop", float(reward)))
                returns += float(reward)
                turn += 1
                if terminated or truncated:
                    successes += bool(info.get("correct", reward > 0))
                    break
            episodes += 1
    finally:
        env.close()
    n = max(episodes, 1)
    return samples, {"demo_return": returns / n, "demo_success": successes / n, "demo_turns": len(samples) / n,
                     "demo_abandoned": abandoned / n}
