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
