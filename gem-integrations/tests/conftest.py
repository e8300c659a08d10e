"""Shared pieces of the adapter tests: a tokenizer (and for TRL a model) built locally the
way gem-train builds its default policy, so nothing is downloaded from a hub.

Each framework's tests run in their own venv (``nox -s "integration(framework='...')"``),
with gem-train installed for its tiny-model builder.
"""

from __future__ import annotations

import pytest
from adapter_kit import ENV_ID


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory):
    """A folder holding gem-train's ChatML tokenizer trained on the env's text."""
    pytest.importorskip("gem_train", reason="the adapter tests build their tokenizer with gem-train")
    import gem
    from gem_train.model import env_corpus
    from gem_train.tokenizer import train_chat_tokenizer

    out = tmp_path_factory.mktemp("tiny-tokenizer")
    texts = env_corpus(lambda: gem.make(ENV_ID), episodes=20) + [f"\\boxed{{{n}}}" for n in range(1, 21)]
    train_chat_tokenizer(texts, vocab_size=400).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """gem-train's default tiny Qwen2 with its env-trained tokenizer, saved as an HF folder."""
    pytest.importorskip("gem_train", reason="the adapter tests build their model with gem-train")
    import gem
    from gem_train.model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), lambda: gem.make(ENV_ID))
