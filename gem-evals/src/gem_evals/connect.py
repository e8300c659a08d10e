"""The :class:`~gem_evals.models.ChatModel` a ``--model`` spec names: an OpenAI-compatible client or a local
engine (the spec's grammar and the types are :mod:`gem_evals.models`)."""

from __future__ import annotations

from gem_evals.models import DEFAULT_REQUEST_TIMEOUT, ChatModel, ModelSpec


def make_model(spec: ModelSpec, *, api_key_env: str = "OPENAI_API_KEY", max_retries: int = 5,
               retry_backoff: float = 0.5, request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
               max_model_len: int = 4096) -> ChatModel:
    """The :class:`ChatModel` a spec names, ready to chat."""
    if spec.kind == "openai":
        from gem_evals.openai_client import OpenAIChatModel

        return OpenAIChatModel(spec.name, spec.base_url, api_key_env=api_key_env, max_retries=max_retries,
                               retry_backoff=retry_backoff, timeout=request_timeout)
    from gem_evals.local_engines import EngineChatModel

    return EngineChatModel(spec.kind, spec.name, max_model_len=max_model_len)
