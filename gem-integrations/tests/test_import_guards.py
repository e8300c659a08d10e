"""The adapters' import guards, checked without any framework installed: a missing
framework names the extra that installs it, a changed hook names the tested version."""

import importlib
import sys

import pytest

from gem_integrations._support import FrameworkVersionError, feedback_text, require_hook

ADAPTERS = {"trl": "trl", "verl": "verl", "openrlhf": "openrlhf.utils.agent",
            "tinker": "tinker_cookbook.rl.types", "gymnasium": "gymnasium", "verifiers": "verifiers",
            "skyrl": "skyrl_gym"}


# gem.integrations.<extra>: the path from when the adapters lived in gem-core, kept by the plugin's compat rows
@pytest.mark.parametrize("package", ["gem_integrations", "gem.integrations"])
@pytest.mark.parametrize("extra", sorted(ADAPTERS))
def test_missing_framework_names_the_extra(monkeypatch, extra, package):
    # None in sys.modules makes the import fail as if the package were absent
    for name in {ADAPTERS[extra], ADAPTERS[extra].split(".")[0], "chz"}:
        monkeypatch.setitem(sys.modules, name, None)
    for module in (f"gem_integrations.{extra}", f"gem.integrations.{extra}"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=rf"pip install .*-e 'gem-integrations\[{extra}\]'"):
        importlib.import_module(f"{package}.{extra}")


def test_an_old_path_is_the_module_itself():
    import gem.integrations._support as old
    import gem_integrations._support as new

    assert old is new


def test_every_module_has_its_old_path():
    from pathlib import Path

    import gem_integrations
    from gem_integrations.plugin import MODULES

    package = Path(gem_integrations.__file__).parent
    assert sorted(MODULES) == sorted(p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "plugin"))


def test_changed_hook_names_the_tested_version():
    with pytest.raises(FrameworkVersionError, match=r"tested against trl==1\.16\.0") as err:
        require_hook(False, dist="trl", tested="1.16.0", extra="trl", what="GRPOTrainer takes no rollout_func")
    assert "gem-integrations[trl]" in str(err.value) and isinstance(err.value, ImportError)
    require_hook(True, dist="trl", tested="1.16.0", extra="trl", what="unused")


class ChatML:
    eos_token = "<|im_end|>"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def test_feedback_text_is_what_the_template_puts_between_replies():
    assert feedback_text(ChatML(), "Lower.", reply_closed=True) == \
        "\n<|im_start|>user\nLower.<|im_end|>\n<|im_start|>assistant\n"
    # a reply cut short (no eos) gets the template's end of turn first
    assert feedback_text(ChatML(), "Lower.", reply_closed=False).startswith("<|im_end|>\n<|im_start|>user")


def test_feedback_text_rejects_templates_that_rewrite_replies():
    class Hiding(ChatML):
        def apply_chat_template(self, messages, **kwargs):
            return super().apply_chat_template([m for m in messages if m["role"] != "assistant"], **kwargs)

    with pytest.raises(ValueError, match="verbatim"):
        feedback_text(Hiding(), "x", reply_closed=True)


def _readme_install_block(extra: str) -> tuple[str, ...]:
    """The pip lines of ``examples/<extra>/README.md``'s ``<!-- install -->`` block (what the
    framework's nox session runs), comments dropped."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "examples" / extra / "README.md").read_text()
    block = text.split("<!-- install -->", 1)[1].split("<!-- /install -->", 1)[0]
    lines = [line.split(" #", 1)[0].strip() for line in block.splitlines()]
    return tuple(line for line in lines if line.startswith("pip "))


@pytest.mark.parametrize("extra", ["trl", "verl", "openrlhf", "tinker", "skyrl", "verifiers"])
def test_the_install_hint_is_the_example_readmes_install_block(extra):
    from gem_integrations._support import INSTALL, install_hint

    assert INSTALL[extra] == _readme_install_block(extra)
    assert " && ".join(INSTALL[extra]) in install_hint(extra)
