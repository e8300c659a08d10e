"""gem.make checks its keyword arguments against the env's constructor before calling it:
an unknown name or a value of the wrong simple type is one clear error, not a TypeError
from deep inside the env."""

import functools
from typing import Optional, Union

import pytest

import gem
from gem.core import Env, Wrapper
from gem.errors import EnvArgumentError, GemError
from gem.testing.envs import CountEnv


class Annotated(Env):
    # real annotation objects (this module has no postponed annotations; CountEnv's are strings),
    # in each spelling a constructor may use
    def __init__(self, rate: float = 0.5, limit: Optional[int] = None, flag: bool = False,  # noqa: UP045
                 name: Union[str, None] = "x", sizes: list = (), anything=None,  # noqa: UP007
                 count: int | None = None) -> None:
        self.args = (rate, limit, flag, name, sizes, anything, count)

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        return "", {}

    def step(self, action):
        return "", 0.0, True, False, {}


class Open(Env):
    def __init__(self, size: int = 3, **options) -> None:
        self.size, self.options = size, options

    reset, step = Annotated.reset, Annotated.step


class Tagged(Wrapper):
    pass


def wrapped_count(**kwargs):
    return Tagged(CountEnv(**kwargs))


def test_an_unknown_argument_is_named_with_the_closest_and_the_accepted_ones(count_registry):
    with pytest.raises(EnvArgumentError) as info:
        gem.make("test:Count-v0", max_turn=3)
    message = str(info.value)
    assert message == ("env 'test:Count-v0' takes no argument 'max_turn'. Did you mean 'max_turns'? "
                       "It takes: high, max_turns, seed.")
    # old `except TypeError` code still catches it, and so does `except GemError`
    assert isinstance(info.value, TypeError) and isinstance(info.value, GemError)


def test_a_value_of_the_wrong_type_names_the_argument_the_type_and_the_value(count_registry):
    with pytest.raises(EnvArgumentError, match=r"^env 'test:Count-v0': max_turns must be int, got 'three' \(str\)\.$"):
        gem.make("test:Count-v0", max_turns="three")
    with pytest.raises(EnvArgumentError, match="high must be int, got 2.5"):
        gem.make("test:Count-v0", high=2.5)


def test_a_bad_registered_default_says_it_comes_from_the_registration(gem_registry):
    gem_registry.register("test:Typo-v0", CountEnv, max_turn=3)
    with pytest.raises(EnvArgumentError, match="'max_turn' \\(a default of its registration\\)"):
        gem.make("test:Typo-v0")
    gem_registry.register("test:Text-v0", CountEnv, high="10")
    with pytest.raises(EnvArgumentError, match="high must be int, got '10' \\(str\\) \\(a default of its regis"):
        gem.make("test:Text-v0")
    assert gem.make("test:Text-v0", high=10).high == 10  # an override replaces the bad default


def test_simple_annotations_accept_what_they_say(gem_registry):
    gem_registry.register("test:Annotated-v0", Annotated)
    import numpy as np

    env = gem.make("test:Annotated-v0", rate=2, limit=np.int64(4), flag=1, name=None, sizes=[1], anything=object)
    assert env.args[:4] == (2, 4, 1, None)  # an int is a fine float, a numpy int a fine int
    for bad, shown in ((dict(rate="fast"), "rate must be float, got 'fast'"),
                       (dict(limit=1.5), "limit must be int or None, got 1.5"),
                       (dict(flag="yes"), "flag must be bool, got 'yes'"),
                       (dict(name=3), "name must be str or None, got 3"),
                       (dict(count="2"), "count must be int or None, got '2'")):
        with pytest.raises(EnvArgumentError, match=shown):
            gem.make("test:Annotated-v0", **bad)


def test_open_constructors_wrappers_partials_and_the_reference_seed_still_work(gem_registry):
    gem_registry.register("test:Open-v0", Open)
    assert gem.make("test:Open-v0", colour="red").options == {"colour": "red"}  # **options takes any name
    with pytest.raises(EnvArgumentError, match="size must be int"):
        gem.make("test:Open-v0", size="big")  # named arguments are still checked
    gem_registry.register("test:Wrapped-v0", wrapped_count)
    assert gem.make("test:Wrapped-v0", max_turns=2).unwrapped.max_turns == 2
    gem_registry.register("test:Partial-v0", functools.partial(CountEnv, high=5))
    assert gem.make("test:Partial-v0", max_turns=2).high == 5
    with pytest.raises(EnvArgumentError, match="Did you mean 'max_turns'"):
        gem.make("test:Partial-v0", max_turn=2)
    # CountEnv's __init__ does not name seed=: Env adds it for reference code
    seeded = gem.make("test:Partial-v0", seed=7)
    assert seeded.seed == 7 and seeded.reset()[0] == gem.make("test:Partial-v0", seed=7).reset()[0]
    envs = gem.make_vec(["test:Partial-v0"] * 2, vec_kwargs=[{"seed": 1}, {"seed": 2}], max_turns=2)
    envs.reset()
    envs.close()
    with pytest.raises(EnvArgumentError, match="max_turn"):
        gem.make_vec(["test:Partial-v0"], max_turn=2)


def test_a_factory_without_a_readable_signature_is_not_checked(gem_registry):
    gem_registry.register("test:Builtin-v0", dict)  # a C callable: nothing to read, so nothing refused
    assert gem.make("test:Builtin-v0", anything=1) == {"anything": 1}


def test_every_registered_id_passes_the_check_with_its_defaults(gem_plugins_catalog):
    # signature binding only: nothing is built, so dataset envs cost an import, not a load
    failures = {}
    for env_id in gem.list_envs():
        try:
            gem.spec(env_id).check_kwargs()
        except EnvArgumentError as exc:
            failures[env_id] = str(exc)
    assert failures == {}
