"""gem-train's engines for ``gem eval --model vllm:PATH`` and ``hf:PATH``.

The eval package (gem-evals) finds :func:`open_chat_engine` through the entry-point group
``gem_evals.engines`` that gem-train's pyproject declares, so neither package imports the
other: chats go in, token ids and text come out, and the settings are gem-core's
:class:`~gem.sampling.Sampling`.

>>> engine = open_chat_engine("hf", "runs/demo/model", max_model_len=1024)     # doctest: +SKIP
>>> prompt = engine.encode([{"role": "user", "content": "Guess a number between 1 and 10."}])  # doctest: +SKIP
>>> [gen] = engine.generate([prompt], Sampling(max_tokens=8))                  # doctest: +SKIP
>>> engine.decode(gen.token_ids)                                               # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from gem.sampling import Sampling
from gem_train.engines import Engine, Generation, make_engine
from gem_train.rollout import encode_prompt


class ChatEngine:
    """A local model folder on one of gem-train's engines, with its tokenizer's chat template.

    Raises ``ValueError`` for a folder without a usable tokenizer and ``ImportError`` when the
    engine's own dependency (vLLM, transformers) cannot be imported.
    """

    def __init__(self, tokenizer: Any, engine: Engine) -> None:
        self.tokenizer, self.engine = tokenizer, engine

    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a chat, the chat template applied once, ready for the model's answer."""
        return encode_prompt(self.tokenizer, messages, False)

    def generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]:
        """One answer per prompt; not thread-safe (one call at a time)."""
        return self.engine.generate(prompts, sampling)

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def close(self) -> None:
        self.engine.close()


def open_chat_engine(kind: str, path: str, max_model_len: int = 4096) -> ChatEngine:
    """The model folder ``path`` on engine ``kind`` (``vllm`` or ``hf``) in this process."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:  # no such folder, or one without a tokenizer
        first_line = (str(exc).splitlines() or [""])[0]
        raise ValueError(f"cannot load a tokenizer from {path!r} ({type(exc).__name__}: {first_line})") from exc
    if tokenizer.chat_template is None:
        raise ValueError(f"the tokenizer in {path} has no chat template: gem eval sends chats")
    options: dict[str, Any] = {"max_model_len": max_model_len} if kind == "vllm" else {}
    return ChatEngine(tokenizer, make_engine(kind, path, **options))
