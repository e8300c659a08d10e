"""``model:SPEC`` opponents of gem-core's multi-agent games (entry point ``gem.opponents``: ``model``).

>>> env = gem.make("multi:TicTacToe-v0", opponent="model:http://127.0.0.1:8000/v1")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gem.sampling import Sampling
from gem_evals.connect import make_model
from gem_evals.models import parse_model_spec


def model_opponent(spec: str, base_url: str | None = None) -> Callable[[str], str]:
    """A policy ``observation -> action`` that asks the model ``spec`` (any ``--model`` value of
    ``gem eval``), the observation sent as one user message, greedy."""
    model = make_model(parse_model_spec(spec, base_url))

    def act(observation: str) -> str:
        # the env steps in a worker thread (astep) or the caller's thread: neither runs an event loop
        return asyncio.run(model.chat([{"role": "user", "content": observation}], Sampling())).text

    return act
