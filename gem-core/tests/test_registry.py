import subprocess
import sys

import pytest

import gem
from gem.errors import (
    EntryPointError,
    InvalidEnvIdError,
    RegistrationError,
    SuiteNotInstalledError,
    UnknownEnvError,
)
from gem.ids import parse_env_id


@pytest.mark.parametrize(
    "env_id, parts",
    [
        ("game:GuessTheNumber-v0-easy", ("game", "GuessTheNumber", 0, "easy")),
        ("game:Game2048-v0-extreme-hard", ("game", "Game2048", 0, "extreme-hard")),
        ("math:Math8K-3to5", ("math", "Math8K-3to5", None, None)),
        ("rg:leg_counting", ("rg", "leg_counting", None, None)),
        ("eval:2Wiki", ("eval", "2Wiki", None, None)),
        ("game:Sokoban-v12", ("game", "Sokoban", 12, None)),
    ],
)
def test_id_grammar(env_id, parts):
    parsed = parse_env_id(env_id)
    assert (parsed.suite, parsed.name, parsed.version, parsed.variant) == parts
    assert str(parsed) == env_id


@pytest.mark.parametrize("bad", ["nocolon", "Game:X", ":x", "game:", "game:-x", "game:a b", 5])
def test_bad_ids_are_rejected_with_the_grammar(bad, gem_registry):
    with pytest.raises(InvalidEnvIdError, match="suite:Name|must be a string"):
        gem_registry.register(bad, "x:Y")


def test_register_is_lazy_and_make_imports(gem_registry):
    gem_registry.register("lazy:Missing-v0", "no_such_module_anywhere:Env")
    assert "no_such_module_anywhere" not in sys.modules
    with pytest.raises(EntryPointError, match="cannot import 'no_such_module_anywhere'"):
        gem.make("lazy:Missing-v0")
    gem_registry.register("lazy:Attr-v0", "gem.testing.envs:NoSuchClass")
    with pytest.raises(EntryPointError, match="no attribute 'NoSuchClass'"):
        gem.make("lazy:Attr-v0")


def test_make_applies_defaults_then_overrides(count_registry):
    env = gem.make("test:Count-v0-hard")
    assert (env.high, env.max_turns) == (100, 7)
    assert env.env_id == "test:Count-v0-hard" and env.spec.id == "test:Count-v0-hard"
    assert gem.make("test:Count-v0-hard", high=3).high == 3
    assert gem.spec("test:Count-v0-hard").kwargs == {"high": 100, "max_turns": 7}


def test_unknown_id_suggests_close_ids(count_registry):
    with pytest.raises(UnknownEnvError, match=r"Did you mean 'test:Count-v0"):
        gem.make("test:Cuont-v0")


def test_known_suite_not_installed_says_what_to_install(gem_registry):
    hint = "from the root of a clone of the GEM repository: pip install -e gem-core -e gem-envs-gam"
    with pytest.raises(SuiteNotInstalledError, match=hint):
        gem.make("game:GuessTheNumber-v0-easy")
    with pytest.raises(SuiteNotInstalledError, match="pip install -e gem-core -e gem-tools -e gem-envs-qa"):
        gem.make("eval:HotpotQA")
    assert issubclass(UnknownEnvError, ValueError)  # the reference raises ValueError


def test_same_id_from_two_distributions_names_both(gem_registry):
    with gem_registry.registering_as("dist-one"):
        gem_registry.register("dup:Env-v0", "a:B")
    with gem_registry.registering_as("dist-two"), pytest.raises(RegistrationError) as info:
        gem_registry.register("dup:Env-v0", "c:D")
    assert "dist-one" in str(info.value) and "dist-two" in str(info.value)


def test_identical_reregistration_is_harmless_but_a_change_is_not(gem_registry):
    gem_registry.register("re:Env-v0", "a:B", x=1)
    gem_registry.register("re:Env-v0", "a:B", x=1)
    with pytest.raises(RegistrationError, match="already registered"):
        gem_registry.register("re:Env-v0", "a:B", x=2)


def test_list_envs_globs_and_substrings(count_registry):
    assert gem.list_envs("test:Count*") == ["test:Count-v0", "test:Count-v0-hard"]
    assert gem.list_envs("hard") == ["test:Count-v0-hard"]
    assert len(gem.list_envs()) == 5


def test_print_envs_groups_by_suite(count_registry, capsys):
    gem.print_envs()
    out = capsys.readouterr().out
    assert out.startswith("test:\n") and "test:Busy-v0" in out


def test_import_gem_imports_no_plugin_or_heavy_module():
    code = (
        "import sys, gem; "
        "bad = [m for m in sys.modules if m.startswith(('gem_', 'torch', 'transformers', 'vllm'))"
        " or m in ('gem.vector', 'gem.runner', 'gem._builtin')]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_factory_returning_a_wrapper_still_records_the_id(gem_registry):
    from gem.testing.envs import CountEnv
    from gem.wrappers import TimeLimit

    gem_registry.register("wrapped:Count-v0", lambda: TimeLimit(CountEnv(), max_steps=2))
    env = gem.make("wrapped:Count-v0")
    assert env.env_id == "wrapped:Count-v0" and env.unwrapped.spec.id == "wrapped:Count-v0"


def test_a_family_makes_every_unregistered_id_of_its_suite(gem_registry):
    from gem.testing.envs import CountEnv

    gem_registry.register_family("fam", lambda size: CountEnv(high=int(size)), "size")
    gem_registry.register("fam:Fixed-v0", "gem.testing.envs:CountEnv", high=3)
    assert gem.make("fam:7").high == 7  # the name after the suite is the argument
    assert gem.make("fam:Fixed-v0").high == 3  # an id registered one by one wins
    with pytest.raises(UnknownEnvError):
        gem.make("other:7")
    with gem_registry.registering_as("dist-two"), pytest.raises(RegistrationError, match="fam"):
        gem_registry.register_family("fam", "a:B", "x")
