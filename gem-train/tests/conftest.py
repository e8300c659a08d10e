"""Shared fixtures: the toy env on sys.path and a tiny model built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # toy_env is imported by "module:Class" strings, as users' own envs are

from toy_env import ToyGuess  # noqa: E402

from gem_train.config import TinyModelConfig  # noqa: E402
from gem_train.model import build_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> Path:
    """A tiny Qwen2 (head_dim 32, as vLLM's CPU attention needs) with a tokenizer trained on ToyGuess."""
    out = tmp_path_factory.mktemp("tiny") / "model"
    return build_tiny_model(out, ToyGuess, TinyModelConfig(vocab_size=400, corpus_episodes=16), max_model_len=256)
