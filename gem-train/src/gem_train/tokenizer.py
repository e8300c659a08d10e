"""A byte-level BPE tokenizer trained on an env's own text, with a ChatML chat template.

Without downloadable weights the trainer builds its model from scratch; its tokenizer
is trained here in about a second on the observations and actions of a few random
episodes, so the env's words and action formats become single tokens.

>>> tok = train_chat_tokenizer(["Guess a number between 1 and 10: \\\\boxed{5}"], vocab_size=300)
>>> tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
'<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_chat_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts``; ``<|im_end|>`` ends a turn (the eos token)."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[PAD, IM_START, IM_END],
        # every byte stays encodable, whatever the corpus held
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # the template's role lines are text the model sees every turn
    corpus = list(texts) + [f"{IM_START}{role}\n" for role in ("system", "user", "assistant")] * 4
    bpe.train_from_iterator(corpus, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=IM_END,
        pad_token=PAD,
        bos_token=None,
        padding_side="left",
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok


def turn_end_ids(tokenizer: Any) -> list[int]:
    """The token ids that end an assistant turn: the eos token and the special token the chat template puts right
    after an assistant message (``<|im_end|>`` for ChatML; a base model's eos, ``<|endoftext|>`` for Qwen3-Base,
    is not it). Sampling stops at any of them.

    >>> turn_end_ids(train_chat_tokenizer(["hello there"], vocab_size=300)) == [train_chat_tokenizer(
    ...     ["hello there"], vocab_size=300).convert_tokens_to_ids(IM_END)]
    True
    """
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    marker = "GEMTURNEND"
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "x"},
                                              {"role": "assistant", "content": marker}], tokenize=False)
    except Exception:  # no template, or one that refuses this exchange: the eos alone
        return ids
    after = text[text.rfind(marker) + len(marker):]
    special = set(getattr(tokenizer, "all_special_tokens", []) or []) | set(
        getattr(tokenizer, "added_tokens_encoder", {}) or {})
    for token in sorted(special, key=len, reverse=True):
        if token and after.lstrip().startswith(token):
            token_id = tokenizer.convert_tokens_to_ids(token)
            if isinstance(token_id, int) and token_id not in ids:
                ids.append(token_id)
            break
    return ids
