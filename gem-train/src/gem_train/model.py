"""The policy model: load any local Hugging Face causal LM, or build the tiny one.

The tiny model is a small Qwen2 (an architecture both transformers and vLLM load)
with a tokenizer trained on the env's own text; it is saved as a normal HF folder, so
every engine loads it by path like any other model.

>>> path = build_tiny_model("runs/demo/model", lambda: gem.make("game:GuessTheNumber-v0-easy"))  # doctest: +SKIP
>>> model, tok = load_policy(path)                                                               # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gem_train.config import TinyModelConfig
from gem_train.tokenizer import train_chat_tokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def env_corpus(make_env: Callable[[], Any], episodes: int, seed: int = 0, max_turns: int = 32) -> list[str]:
    """Observations and random actions of ``episodes`` episodes: the tokenizer's training text."""
    env = make_env()
    texts: list[str] = []
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            texts.append(str(obs))
            for _ in range(max_turns):
                action = env.sample_random_action()
                obs, _, terminated, truncated, info = env.step(action)
                texts += [action, str(obs), str(info.get("prefix", "")), str(info.get("suffix", ""))]
                if terminated or truncated:
                    break
    finally:
        env.close()
    return [t for t in texts if t]


def build_tiny_model(
    out_dir: str | Path,
    make_env: Callable[[], Any],
    cfg: TinyModelConfig | None = None,
    max_model_len: int = 1024,
    seed: int = 0,
    extra_texts: list[str] | None = None,
    device: str | torch.device = "cpu",
) -> Path:
    """Train a tokenizer on the env's text, initialise a tiny Qwen2 and save both to ``out_dir``.

    A folder that already holds a built model is reused (the build is deterministic in
    its arguments, which ``gem_train_build.json`` records).
    """
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    cfg = cfg or TinyModelConfig()
    out = Path(out_dir)
    recipe = {"tiny": vars(cfg), "max_model_len": max_model_len, "seed": seed}
    if str(device) != "cpu":
        # initialised where it trains (seconds on a GPU where a CPU takes a minute at 1.7B): its random weights
        # come from that device's generator, so the folder is another build
        recipe["device"] = torch.device(device).type
    marker = out / "gem_train_build.json"
    if marker.exists() and json.loads(marker.read_text()) == recipe:
        return out
    texts = env_corpus(make_env, cfg.corpus_episodes, seed=seed) + list(extra_texts or [])
    tok = train_chat_tokenizer(texts, vocab_size=cfg.vocab_size)
    qwen3 = cfg.architecture == "qwen3"
    config_class, model_class = (Qwen3Config, Qwen3ForCausalLM) if qwen3 else (Qwen2Config, Qwen2ForCausalLM)
    # Qwen3 names its head width itself (it is not hidden_size / heads in the real models)
    extra = {"head_dim": cfg.hidden_size // cfg.num_heads} if qwen3 else {}
    config = config_class(
        **extra,
        vocab_size=max(len(tok), cfg.embedding_rows or 0),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=max_model_len,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = model_class(config)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    marker.write_text(json.dumps(recipe))
    return out


def load_policy(path: str | Path, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a local HF folder; the tokenizer pads on the left."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if tok.chat_template is None:
        raise ValueError(f"the tokenizer in {path} has no chat template; the trainer applies one per turn")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype]).to(device)
    return model, tok


def tied_names(model: Any) -> frozenset[str]:
    """The names under which ``model`` holds a parameter it also holds under an earlier name (tied weights: an
    output head that is the input embedding, as Qwen3-1.7B's): what a copy of its weights need not take twice.

    >>> tied = torch.nn.ModuleDict({"embed": torch.nn.Embedding(4, 2), "head": torch.nn.Linear(2, 4, bias=False)})
    >>> tied["head"].weight = tied["embed"].weight
    >>> sorted(tied_names(tied))
    ['head.weight']
    """
    seen: set[int] = set()
    tied = set()
    for name, parameter in model.named_parameters(remove_duplicate=False):
        if id(parameter) in seen:
            tied.add(name)
        seen.add(id(parameter))
    return frozenset(tied)


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device
