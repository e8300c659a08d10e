"""QaEnv: one question, one answer, exact match against the gold aliases."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import gem
from gem.core import StepResult
from gem_envs_qa import sources
from gem_envs_qa.extract import answer_tag, last_boxed
from gem_envs_qa.metrics import contains_answer, exact_match, f1_score

#: the observation after the single step (the reference package's terminal marker)
TERMINAL_STATE = "<｜TERMINAL_STATE｜>"

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


class QaEnv(gem.Env):
    """A single-turn question-answering env (a contextual bandit).

    ``reset()`` poses a question (wrapped in the think-then-answer prompt);
    ``step(response)`` reads the answer from the last ``<answer>…</answer>`` (or the last
    ``\\boxed{…}`` with ``extract_boxed=True``) and ends the episode: reward 1.0 when it
    matches any gold alias after SQuAD normalisation, else 0.0; a response with no answer
    earns ``format_error_reward`` (0.0, as in the reference; GEM's generic convention is
    -0.1). Questions with a multi-part answer (FanOutQA) are correct when every part is
    stated. ``info`` holds ``correct``, ``f1`` (token-level, best alias),
    ``extracted_answer``, ``format_error`` and ``reference_answer``.

    Where the questions come from (first match wins): ``dataset`` (a sequence of dicts),
    ``source`` (a packaged dataset name, see :data:`gem_envs_qa.sources.PACKAGED`, or a
    local ``.jsonl``/``.json``/``.parquet`` file), ``dataset_name`` + ``split`` (the HF hub,
    when reachable). ``question_key``/``answer_key`` name the fields of file and hub rows.

    ``reset(idx=i)`` poses question ``i`` (evaluation order); otherwise questions come in
    shuffled epochs drawn from the env's own RNG (``shuffle=False``: dataset order).
    ``seed`` seeds that RNG at construction; ``verbose`` and ``load_from_cache_file`` are
    accepted for compatibility with the reference's signature and change nothing.

    >>> env = QaEnv(dataset=[{"question": "Capital of France?", "answer": ["Paris"]}])
    >>> obs, info = env.reset(idx=0)
    >>> env.step("<think>easy</think> <answer>paris</answer>")[1]
    1.0
    """

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
    ) -> None:
        if dataset is not None:
            questions: Sequence[Mapping[str, Any]] = sources.Questions(
                "dataset", sources.records_from_rows(dataset, question_key, answer_key)
            )
        else:
            questions = sources.load(source, dataset_name, split, question_key, answer_key)
        if len(questions) == 0:
            raise ValueError("QaEnv got an empty dataset")
        self.questions = questions
        self.extract_boxed = bool(extract_boxed)
        if prompt_template is None:
            prompt_template = BOXED_PROMPT_TEMPLATE if self.extract_boxed else PROMPT_TEMPLATE
        self.prompt_template = prompt_template
        self.format_error_reward = float(format_error_reward)
        self.shuffle = shuffle
        if seed is not None:
            self._seed(seed)
        self._order: list[int] | None = None
        self._epoch_seed = 0
        self._epoch = 0
        self._position = 0
        self._current: int | None = None

    # -- question order ---------------------------------------------------------------
    def _permutation(self, epoch_seed: int) -> list[int]:
        indices = list(range(len(self.questions)))
        if self.shuffle:
            # a private generator seeded from the env's stream: the order is a function
            # of one integer, so get_state stores that integer, not the order
            random.Random(epoch_seed).shuffle(indices)
        return indices

    def _new_epoch(self) -> None:
        self._epoch_seed = self.rng.getrandbits(63)
        self._order = self._permutation(self._epoch_seed)
        self._position = 0

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """Pose the next question; ``idx`` picks question ``idx``, ``seed`` restarts the
        shuffled order from that seed."""
        super().reset(seed)
        if idx is not None:
            if not 0 <= int(idx) < len(self.questions):
                raise IndexError(f"idx={idx} is outside the dataset (0..{len(self.questions) - 1})")
            self._current = int(idx)
        else:
            if seed is not None:
                self._epoch = 0
                self._new_epoch()
            elif self._order is None or self._position >= len(self._order):
                if self._order is not None:
                    self._epoch += 1
                self._new_epoch()
            assert self._order is not None
            self._current = self._order[self._position]
            self._position += 1
        return self.prompt_template.format(question=self.question), {"idx": self._current, "epoch": self._epoch}

    def _record(self) -> Mapping[str, Any]:
        if self._current is None:
            raise RuntimeError("call reset() before step()")
        return self.questions[self._current]

    @property
    def question(self) -> str:
        """The current question, without the prompt around it."""
        return str(self._record()["question"])

    @property
    def answer(self) -> list[str]:
        """The current question's gold aliases."""
        return list(self._record()["answer"])

    # -- the single step --------------------------------------------------------------
    def step(self, action: str) -> StepResult:
        record = self._record()
        text = action if isinstance(action, str) else str(action)
        extracted = last_boxed(text) if self.extract_boxed else answer_tag(text)
        info: dict[str, Any] = {"reference_answer": list(record["answer"]), "idx": self._current}
        if extracted is None:
            info.update(correct=False, f1=0.0, extracted_answer=None, format_error=True)
            return TERMINAL_STATE, self.format_error_reward, True, False, info
        parts = record.get("answer_parts")
        if parts:
            found = [contains_answer(extracted, part) for part in parts]
            correct = all(found)
            info["part_recall"] = sum(found) / len(found)
        else:
            correct = exact_match(extracted, record["answer"])
        info.update(correct=correct, f1=f1_score(extracted, record["answer"]), extracted_answer=extracted,
                    format_error=False)  # fmt: skip
        return TERMINAL_STATE, 1.0 if correct else 0.0, True, False, info

    def sample_random_action(self) -> str:
        answer = self.rng.choice(_RANDOM_ANSWERS)
        return f"\\boxed{{{answer}}}" if self.extract_boxed else f"<think>guess</think> <answer>{answer}</answer>"

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "rng": self.rng_state(),
            "epoch": self._epoch,
            "epoch_seed": self._epoch_seed,
            "position": self._position,
            "has_order": self._order is not None,
            "current": self._current,
            "size": len(self.questions),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state["size"] != len(self.questions):
            raise ValueError(f"state is of a dataset of {state['size']} questions, this env has {len(self.questions)}")
        self.set_rng_state(state["rng"])
        self._epoch = state["epoch"]
        self._epoch_seed = state["epoch_seed"]
        self._position = state["position"]
        self._order = self._permutation(self._epoch_seed) if state["has_order"] else None
        self._current = state["current"]
