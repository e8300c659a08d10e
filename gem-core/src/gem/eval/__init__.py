"""GEM as an evaluation toolkit: score any model on any env with one command.

``gem eval ENV_IDS --model MODEL`` (see :mod:`gem.eval.cli`) or from Python::

    from gem.eval import EvalConfig, evaluate
    result = evaluate(EvalConfig(["game:GuessTheNumber-v0-easy"], model="http://127.0.0.1:8000/v1"))
    result.summaries[0]["success_rate"]

Models: an OpenAI-compatible endpoint, or a local folder run by gem-train's vLLM / HF
engines (:mod:`gem.eval.models`). Episodes run concurrently through :mod:`gem.runner`;
every finished episode is a JSONL line, so an interrupted evaluation resumes
(:mod:`gem.eval.records`); reports give success rates with Wilson intervals and pass@k
(:mod:`gem.eval.metrics`). :mod:`gem.eval.testing_server` is a scripted endpoint with
known answers for tests and smoke runs.
"""

from __future__ import annotations

from gem.eval.evaluation import EvalConfig, EvalResult, aevaluate, evaluate
from gem.eval.models import ChatModel, Completion, EndpointError, Sampling

__all__ = ["ChatModel", "Completion", "EndpointError", "EvalConfig", "EvalResult", "Sampling", "aevaluate",
           "evaluate"]
