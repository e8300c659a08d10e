"""QaEnv: one question, one answer, exact match against the gold aliases."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from gem.conventions import FORMAT_ERROR
from gem.core import TERMINAL_STATE, StepResult
from gem.data import DatasetEnv, Records
from gem.parsing import answer_tag, last_boxed
from gem.reward_range import graded
from gem_envs_qa import sources
from gem_envs_qa.metrics import exact_match, f1_score, parts_stated

#: the reference package's QA prompt, kept word for word so that models trained on it see
#: the same text: reason in <think>, answer in <answer>
PROMPT_TEMPLATE = (
    "For any question, always reason through your thought process using:\n"
    "<think> your reasoning here </think>\n"
    "Then, provide your final answer using:\n"
    "<answer> your answer here </answer>\n\n"
    "Question: {question}\n"
)

#: the same instructions for ``extract_boxed=True`` (the reference keeps the <answer>
#: wording there, which asks for a format it then does not read)
BOXED_PROMPT_TEMPLATE = (
    "For any question, always reason through your thought process using:\n"
    "<think> your reasoning here </think>\n"
    "Then, provide your final answer using:\n"
    "\\boxed{{your answer here}}\n\n"
    "Question: {question}\n"
)

_RANDOM_ANSWERS = ("Hello World!", "Paris", "1969", "George Washington", "the Nile", "")


class QaEnv(DatasetEnv):
    """A single-turn question-answering env (a contextual bandit).

    ``reset()`` poses a question (wrapped in the think-then-answer prompt);
    ``step(response)`` reads the answer from the last ``<answer>…</answer>`` (or the last
    ``\\boxed{…}`` with ``extract_boxed=True``) and ends the episode: reward 1.0 when it
    matches any gold alias after SQuAD normalisation, else 0.0; a response with no answer
    earns ``format_error_reward`` (0.0, as in the reference; GEM's generic convention is
    -0.1). Questions with a multi-part answer (FanOutQA) are correct when every part is
    stated, in an answer not much longer than the parts (listing candidates scores 0;
    see :func:`~gem_envs_qa.metrics.parts_stated`). ``info`` holds ``correct``, ``f1``
    (token-level, best alias), ``extracted_answer``, ``format_error`` and
    ``reference_answer``.

    Where the questions come from (first match wins): ``dataset`` (a sequence of dicts),
    ``source`` (a packaged dataset name, see :data:`gem_envs_qa.sources.PACKAGED`, a
    local ``.jsonl``/``.json``/``.parquet`` file, or ``"hub:<name>"``; see
    :func:`gem.data.load_source`), ``dataset_name`` + ``split`` (the HF hub, when
    reachable). ``question_key``/``answer_key`` name the fields of file and hub rows.

    ``reset(idx=i)`` poses question ``i`` (evaluation order); otherwise questions come in
    shuffled epochs drawn from the env's own RNG (``shuffle=False``: dataset order).
    ``seed`` seeds that RNG at construction; ``verbose`` and ``load_from_cache_file`` are
    accepted for compatibility with the reference's signature and change nothing.

    >>> env = QaEnv(dataset=[{"question": "Capital of France?", "answer": ["Paris"]}])
    >>> obs, info = env.reset(idx=0)
    >>> env.step("<think>easy</think> <answer>paris</answer>")[1]
    1.0
    """

    #: rewards lie in [min(0, format_error_reward), 1]; gem.Env turns any other into a grading failure
    reward_range = graded

    def __init__(
        self,
        dataset_name: str | None = None,
        split: str | None = None,
        question_key: str = "question",
        answer_key: str = "answer",
        seed: int | None = None,
        extract_boxed: bool = False,
        *,
        source: str | None = None,
        dataset: Sequence[Mapping[str, Any]] | None = None,
        prompt_template: str | None = None,
        format_error_reward: float = 0.0,
        shuffle: bool = True,
        verbose: bool = False,
        load_from_cache_file: bool = True,
        **unknown: Any,
    ) -> None:
        if unknown:  # the reference swallows unknown arguments (e.g. max_turns=): say so instead of failing
            warnings.warn(f"QaEnv ignores unknown arguments: {', '.join(sorted(unknown))}", stacklevel=2)
        if dataset is not None:
            questions: Sequence[Mapping[str, Any]] = Records(
                "dataset", sources.records_from_rows(dataset, question_key, answer_key)
            )
        else:
            questions = sources.load(source, dataset_name, split, question_key=question_key, answer_key=answer_key)
        super().__init__(questions, shuffle=shuffle, seed=seed)
        self.extract_boxed = bool(extract_boxed)
        if prompt_template is None:
            prompt_template = BOXED_PROMPT_TEMPLATE if self.extract_boxed else PROMPT_TEMPLATE
        self.prompt_template = prompt_template
        self.format_error_reward = float(format_error_reward)

    def pose(self, record: Mapping[str, Any]) -> str:
        return self.prompt_template.format(question=record["question"])

    @property
    def question(self) -> str:
        """The current question, without the prompt around it."""
        return str(self.record["question"])

    @property
    def answer(self) -> list[str]:
        """The current question's gold aliases."""
        return list(self.record["answer"])

    @answer.setter
    def answer(self, answer: str | Sequence[str]) -> None:
        # the reference's evaluation loop: ``env.answer = gold; env.step(response)``
        aliases = [answer] if isinstance(answer, str) else list(answer)
        self.record = {**(self.record if self.index is not None else {}), "answer": aliases, "answer_parts": None}

    # -- the single step --------------------------------------------------------------
    def step(self, action: str) -> StepResult:
        record = self.record
        text = action if isinstance(action, str) else str(action)
        extracted = last_boxed(text) if self.extract_boxed else answer_tag(text)
        info: dict[str, Any] = {"reference_answer": list(record["answer"]), "idx": self.index}
        if extracted is None:
            info.update(correct=False, f1=0.0, extracted_answer=None, **{FORMAT_ERROR: True})
            return TERMINAL_STATE, self.format_error_reward, True, True, info
        parts = record.get("answer_parts")
        if parts:
            found = parts_stated(extracted, parts)
            correct = all(found)
            info["part_recall"] = sum(found) / len(found)
        else:
            correct = exact_match(extracted, record["answer"])
        info.update(correct=correct, f1=f1_score(extracted, record["answer"]), extracted_answer=extracted,
                    **{FORMAT_ERROR: False})  # fmt: skip
        return TERMINAL_STATE, 1.0 if correct else 0.0, True, True, info

    def sample_random_action(self) -> str:
        answer = self.rng.choice(_RANDOM_ANSWERS)
        return self._formatted(answer)

    def _formatted(self, answer: str) -> str:
        return f"\\boxed{{{answer}}}" if self.extract_boxed else f"<think>guess</think> <answer>{answer}</answer>"

    def audit_answers(self) -> tuple[str | None, str | None]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`): the first gold alias (of each
        part, for a multi-part answer) and one of the random answers that matches no alias. With them the
        audit's baseline answers wrong rather than at random (a random answer is right by luck only where a
        gold alias is "Paris" or "1969"), and it plays the right answer to tell a severe finding."""
        record = self.record
        parts = record.get("answer_parts")
        golds = [str(g) for g in record["answer"]]
        if parts:
            right: str | None = ", ".join(str(next(iter(p))) if not isinstance(p, str) else p for p in parts)
        else:
            right = golds[0] if golds else None
        wrong = next((a for a in _RANDOM_ANSWERS if a and not exact_match(a, golds)
                      and not (parts and all(parts_stated(a, parts)))), None)
        return (None if right is None else self._formatted(right)), (None if wrong is None else self._formatted(wrong))
