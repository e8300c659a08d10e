"""GEM as an evaluation toolkit: score any model on any env with one command.

``gem eval ENV_IDS --model MODEL`` (see :mod:`gem_evals.cli`) or from Python::

    from gem_evals import EvalConfig, evaluate
    result = evaluate(EvalConfig(["game:GuessTheNumber-v0-easy"], model="http://127.0.0.1:8000/v1"))
    result.summaries[0]["success_rate"]

Models: an OpenAI-compatible endpoint, or a local folder run by gem-train's vLLM / HF
engines (:mod:`gem_evals.models`). Episodes run concurrently through :mod:`gem.runner`;
every finished episode is a JSONL line, so an interrupted evaluation resumes
(:mod:`gem_evals.records`); reports give success rates with Wilson intervals and pass@k
(:mod:`gem_evals.metrics`). :mod:`gem_evals.testing_server` is a scripted endpoint with
known answers for tests and smoke runs.
"""

from __future__ import annotations

import importlib
from typing import Any

# imported on first use: the `gem` CLI loads this package's plugin on every command
_EXPORTS = {
    "EvalConfig": "gem_evals.evaluation", "EvalResult": "gem_evals.evaluation", "aevaluate": "gem_evals.evaluation",
    "evaluate": "gem_evals.evaluation", "ChatModel": "gem_evals.models", "Completion": "gem_evals.models",
    "EndpointError": "gem_evals.models", "Sampling": "gem_evals.models",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'gem_evals' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
