"""What every adapter needs: importing its framework with a helpful error, checking the
hook it uses still has the shape it was tested against, making envs from an id, an env
or a factory, and the chat-template text that sits between two assistant turns."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import Any

from gem.core import Env
from gem.errors import GemError
from gem.factory import EnvFactory

EnvSource = str | Env | Callable[[], Env]

#: stands for the assistant's reply while rendering a template; never shown to a model
_ACTION_MARK = "\x00gem-action\x00"


class FrameworkVersionError(GemError, ImportError):
    """The installed framework's hook differs from the one the adapter was tested with."""


#: the install commands each example README gives (examples/<extra>/README.md, its ``<!-- install -->``
#: block, which the noxfile runs; a test checks the two agree), run from the root of a clone of the repo
INSTALL: dict[str, tuple[str, ...]] = {
    "trl": ("pip install torch==2.13.0",
            "pip install -e gem-core -e 'gem-integrations[trl]' -e gem-envs-games -e gem-train"),
    "verl": ("pip install torch==2.13.0", "pip install -e gem-core -e 'gem-integrations[verl]' -e gem-envs-games"),
    "openrlhf": ("pip install torch==2.13.0",
                 "pip install -e gem-core -e 'gem-integrations[openrlhf]' -e gem-envs-games",
                 "pip install --no-deps openrlhf==0.11.2"),
    "tinker": ("pip install torch==2.13.0",
               "pip install -e gem-core -e 'gem-integrations[tinker]' -e gem-envs-games -e gem-train",
               "pip install --no-deps tinker-cookbook==0.6.1"),
    "skyrl": ("pip install -e gem-core -e 'gem-integrations[skyrl]' -e gem-envs-games",),
    # gem-evals: the scripted server the example's --dry-run plays against
    "verifiers": ("pip install -e gem-core -e 'gem-integrations[verifiers]' -e gem-envs-games -e gem-evals",),
}


def install_hint(extra: str) -> str:
    """How to install the framework of ``gem_integrations.<extra>``, on one line."""
    if extra in INSTALL:
        gpu = " (a CUDA torch instead on a GPU machine)" if any("torch==" in c for c in INSTALL[extra]) else ""
        return f"from a clone of the GEM repo, as examples/{extra}/README.md says{gpu}: {' && '.join(INSTALL[extra])}"
    return f"from a clone of the GEM repo: pip install -e gem-core -e 'gem-integrations[{extra}]'"


def import_framework(module: str, *, dist: str, extra: str, tested: str) -> ModuleType:
    """Import ``module`` from the framework ``dist``, or say in one line how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ImportError(
            f"gem_integrations.{extra} needs {dist}=={tested} ({module}: {reason}); install it {install_hint(extra)}"
        ) from exc


def installed_version(dist: str) -> str:
    """The installed version of ``dist``, or ``"unknown"``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def require_hook(ok: bool, *, dist: str, tested: str, extra: str, what: str) -> None:
    """Fail early, naming the tested version, when the framework's hook changed shape."""
    if not ok:
        raise FrameworkVersionError(
            f"{dist} {installed_version(dist)}: {what}. gem_integrations.{extra} was written and tested against "
            f"{dist}=={tested}; install that version {install_hint(extra)}"
        )


def env_factory(env: EnvSource, wrappers: Any = None) -> Callable[[], Env]:
    """A zero-argument callable that builds a fresh env from an id, an env (spawned) or a factory
    (gem's one :class:`~gem.factory.EnvFactory`)."""
    return EnvFactory(env, wrappers=wrappers or None)


def first_prompt(tokenizer: Any, observation: str, system_prompt: str | None = None) -> str:
    """The templated text of an episode's first turn, ending with the generation prompt."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": str(observation)})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def feedback_text(tokenizer: Any, observation: str, reply_closed: bool) -> str:
    """The template text after an assistant reply: the reply's closing tokens, the env's
    observation as the next user message, and the next generation prompt.

    ``reply_closed``: the generated tokens already end with the template's end-of-turn
    token (generation stopped on eos), so that token is not repeated. Rendering a
    marked conversation and cutting after the mark gives exactly what the template
    would put there, for any template that shows the assistant's content verbatim.

    >>> class ChatML:
    ...     eos_token = "<|im_end|>"
    ...     def apply_chat_template(self, messages, tokenize, add_generation_prompt):
    ...         text = "".join(f"<|im_start|>{m['role']}\\n{m['content']}<|im_end|>\\n" for m in messages)
    ...         return text + ("<|im_start|>assistant\\n" if add_generation_prompt else "")
    >>> feedback_text(ChatML(), "Higher.", reply_closed=True)
    '\\n<|im_start|>user\\nHigher.<|im_end|>\\n<|im_start|>assistant\\n'
    """
    messages = [
        {"role": "user", "content": "?"},
        {"role": "assistant", "content": _ACTION_MARK},
        {"role": "user", "content": str(observation)},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if _ACTION_MARK not in rendered:
        raise ValueError("the tokenizer's chat template does not show assistant messages verbatim; "
                         "GEM's adapters need one that does (e.g. ChatML)")
    tail = rendered[rendered.index(_ACTION_MARK) + len(_ACTION_MARK):]
    eos = getattr(tokenizer, "eos_token", None)
    if reply_closed and eos and tail.startswith(eos):
        tail = tail[len(eos):]
    return tail


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of template text (the template already holds any special tokens)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
