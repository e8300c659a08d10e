"""The reference package's module paths and behaviours, as a switching user's code meets them."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gem
from gem import compat
from gem.testing.envs import CountEnv

TABLE = compat.rows()
NAMES = [(path, name) for path, entry in TABLE.items() if isinstance(entry, dict) for name in entry]
ALIASES = [path for path, entry in TABLE.items() if isinstance(entry, str)]


def _skip_if_suite_absent(path: str) -> None:
    missing = [top for top in compat.requirements(path) if importlib.util.find_spec(top) is None]
    if missing:
        pytest.skip(f"{path} needs {', '.join(missing)}, not installed in this venv")


@pytest.mark.parametrize(("path", "name"), NAMES, ids=[f"{p}.{n}" for p, n in NAMES])
def test_every_reference_name_resolves_to_our_object(path, name):
    _skip_if_suite_absent(path)
    module = importlib.import_module(path)
    value, ours = getattr(module, name), compat.resolve(TABLE[path][name])
    assert value is ours or (isinstance(ours, list) and value == ours)
    assert name in module.__all__ and name in dir(module)


@pytest.mark.parametrize("path", ALIASES)
def test_a_whole_module_path_is_our_module(path):
    _skip_if_suite_absent(path)
    assert importlib.import_module(path) is importlib.import_module(TABLE[path])


def test_import_gem_imports_no_suite_and_reference_paths_stay_lazy():
    # a reference path loads the plugins (each suite maps its own paths), and nothing more of any suite
    code = (
        "import sys, gem\n"
        "print(sorted(m for m in sys.modules if m.startswith('gem_')))\n"
        "gem.plugins.catalog()\n"
        "loaded = set(sys.modules)\n"
        "import gem.envs.registration, gem.utils.parsing, gem.envs.math_env\n"
        "print(sorted(m for m in set(sys.modules) - loaded if m.startswith(('gem_', 'gem.compat.reference_api'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode:  # gem-envs-math absent: that import fails, and says so
        assert "pip install -e gem-core -e 'gem-envs-math[reasoning-gym]'" in out.stderr
    else:
        assert out.stdout.split() == ["[]", "[]"]


def test_a_path_whose_suite_is_absent_says_what_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gem_envs_math" else real_find_spec(name, *a)
    )
    monkeypatch.delitem(sys.modules, "gem.envs.math_env", raising=False)
    expected = (r"needs gem-envs-math, not installed: install gem-envs-math from the root of a clone of the GEM "
                r"repository: ")
    with pytest.raises(ImportError, match=expected + r"pip install -e gem-core -e 'gem-envs-math\[reasoning-gym\]'$"):
        from gem.envs.math_env import MathEnv  # noqa: F401
    monkeypatch.delitem(sys.modules, "gem.envs.reasoning_gym", raising=False)
    with pytest.raises(ImportError, match=r"pip install -e gem-core -e '?gem-envs-math"):
        import gem.envs.reasoning_gym  # noqa: F401


def test_an_unknown_name_of_a_reference_module_is_an_attribute_error():
    import gem.utils.parsing as parsing

    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        parsing.nope  # noqa: B018
    with pytest.raises(ImportError):
        from gem.utils.parsing import nope  # noqa: F401


def test_our_real_packages_win_over_the_table():
    import gem.vector.sync_vector_env as reference_sync
    import gem.wrappers.wrapper_factory as factory

    assert gem.wrappers.get_wrapper_fns is factory.get_wrapper_fns
    assert reference_sync.SyncVectorEnv is gem.vector.SyncVectorEnv
    for real in ("gem.wrappers", "gem.vector"):  # found on disk, not synthesised
        synthesised = type(compat.ReferencePathFinder().find_spec("gem.envs").loader)
        assert not isinstance(importlib.import_module(real).__spec__.loader, synthesised)


def test_core_type_variables_and_version():
    from gem.__about__ import __version__
    from gem.core import ActType, ObsType

    assert __version__ == gem.__version__ and ActType.__name__ == "ActType" and ObsType.__name__ == "ObsType"


# -- behaviour ---------------------------------------------------------------------------
def test_the_reference_seed_constructor_argument_fixes_the_stream(count_registry):
    first = [gem.make("test:Count-v0", seed=7) for _ in range(2)]
    assert first[0].reset() == first[1].reset()
    assert first[0].get_state() == first[1].get_state()
    assert CountEnv(high=1000, seed=3).reset() == CountEnv(high=1000, seed=3).reset()
    # an unseeded env still draws from OS entropy
    states = []
    for _ in range(3):
        env = CountEnv(high=10**9)
        env.reset()
        states.append(str(env.get_state()))
    assert len(set(states)) == 3


def test_vec_kwargs_seeds_reach_each_env_and_decide_its_stream(count_registry):
    def first_states(base: int, seeds: list[int]) -> list[dict]:
        # written as the reference's training examples write it (make_vec's seed left alone)
        envs = gem.make_vec(["test:Count-v0-hard"] * 2, vec_kwargs=[{"seed": base + s} for s in seeds])
        envs.reset()
        states = envs.call("get_state")
        envs.close()
        return states

    same = first_states(5, [0, 0])
    assert same[0] == same[1]
    assert first_states(5, [0, 1]) == first_states(5, [0, 1])
    assert first_states(5, [0, 1]) != first_states(6, [0, 1])  # another base seed, other episodes


def test_episode_tracking_has_the_reference_keys_and_ours():
    from gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper

    env = EpisodeTrackingWrapper(CountEnv(high=1, max_turns=3))
    _, info = env.reset(seed=0)
    assert (info["step_counter"], info["cumulative_rewards"], info["prev_ep_step_counter"]) == (0, 0.0, 0)
    _, reward, *_, info = env.step("\\boxed{1}")
    assert info["step_counter"] == info["step"] == 1
    assert info["cumulative_rewards"] == info["cumulative_reward"] == reward
    _, info = env.reset(seed=1)
    assert (info["prev_ep_step_counter"], info["prev_ep_cumulative_rewards"]) == (1, reward)


def test_wrapper_factory_reads_like_the_reference_dict():
    from gem.wrappers.wrapper_factory import TOKENIZER_REQUIRED, WRAPPER_FACTORY, get_wrapper_fns

    assert {"concat", "concat_with_action", "concat_chat", "concat_chat_on_reset", "episode_tracking"} <= set(
        WRAPPER_FACTORY
    )
    assert set(TOKENIZER_REQUIRED) == {"concat_chat", "concat_chat_on_reset"}
    env = WRAPPER_FACTORY["concat_with_action"](CountEnv())
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step("\\boxed{3}")
    assert "\\boxed{3}" in obs
    (chat,) = get_wrapper_fns("concat_chat", tokenizer=None)  # the reference returns it unbound
    with pytest.raises(ValueError, match="tokenizer"):
        chat(CountEnv())
    with pytest.raises(KeyError):
        WRAPPER_FACTORY["no_such_wrapper"]


def test_env_registry_reads_like_the_reference_dict(count_registry):
    from gem.envs.registration import ENV_REGISTRY, EnvSpec, make, register

    register("test:Coin-v0", CountEnv, high=2)
    assert "test:Coin-v0" in ENV_REGISTRY and isinstance(ENV_REGISTRY["test:Coin-v0"], EnvSpec)
    assert ENV_REGISTRY["test:Coin-v0"].kwargs == {"high": 2}
    assert "test:Coin-v0" in list(ENV_REGISTRY.keys()) and len(ENV_REGISTRY) == len(list(ENV_REGISTRY))
    made = make("test:Coin-v0")
    assert made.env_id == "test:Coin-v0" and made.entry_point is CountEnv
    with pytest.raises(KeyError):
        ENV_REGISTRY["test:Nope-v0"]


@pytest.mark.parametrize(
    "module", ["gem.vector.sync_vector_env:SyncVectorEnv", "gem.vector.async_vector_env:AsyncVectorEnv"]
)
def test_vector_envs_built_the_reference_way(module):
    from gem.vector.vector_env import AutoresetMode, VectorEnv

    cls = compat.resolve(module)
    envs = cls(env_ids=["a", "b"], env_fns=[lambda: CountEnv(high=1, max_turns=1)] * 2)
    assert isinstance(envs, VectorEnv) and envs.autoreset_mode == AutoresetMode.SAME_STEP
    obs, infos = envs.reset(seed=0)
    obs, rewards, terminated, truncated, infos = envs.step(["\\boxed{1}", "\\boxed{1}"])
    # same-step autoreset, as the reference: the new episode's observation and reset info
    # come back, and ours adds the ending observation and info
    assert terminated.all() and rewards.tolist() == [1.0, 1.0]
    assert all(o.startswith("Guess") for o in obs) and all("final_obs" in i and "final_info" in i for i in infos)
    assert len(envs.envs) == 2
    envs.close()


def test_reference_parsing_helpers():
    from gem.utils.parsing import extract_code_from_model, extract_last_boxed_answer, extract_last_tagged_answer

    assert extract_last_boxed_answer("a \\boxed{1} b \\boxed{ 2 }") == " 2 "
    assert extract_last_boxed_answer("no box") is None
    assert extract_last_tagged_answer("<answer> x </answer><answer>y</answer>") == "y"
    assert extract_code_from_model("```python\nprint(1)\n```\ntext\n```\nprint(2)\n```") == "print(2)"
    assert extract_code_from_model("```" * 10_000) is None  # linear in the fences


_PIECES = ["\\boxed", "\\boxed{", "{", "}", "\\fbox{", "<answer>", "</answer>", "x", " ", "\n", "```", "```py\n"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join))
def test_reference_parsing_helpers_read_odd_inputs_as_the_reference(text):
    # the reference's readings, written from its documented grammar: the last regex match of
    # <answer>(.*?)</answer>; the last \boxed only, which must open a brace that balances
    from gem.utils.parsing import extract_last_boxed_answer, extract_last_tagged_answer

    tags = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    assert extract_last_tagged_answer(text) == (tags[-1].strip() if tags else None)
    start = text.rfind("\\boxed")
    expected = None
    if start >= 0 and text.startswith("\\boxed{", start):
        depth = 0
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if text[i] == "}" and depth == 0:
                expected = text[start + len("\\boxed{") : i]
                break
    assert extract_last_boxed_answer(text) == expected


def test_the_reference_parsing_helpers_are_linear_on_hostile_text():
    from gem.utils.parsing import extract_last_boxed_answer, extract_last_tagged_answer

    assert extract_last_tagged_answer("<answer>" * 100_000) is None
    assert extract_last_boxed_answer("\\boxed{" + "{" * 100_000) is None


def test_reference_constants_and_seeding():
    from gem.utils import seeding
    from gem.utils.constants import TERMINAL_STATE, LanguageGameReward

    assert TERMINAL_STATE == "<｜TERMINAL_STATE｜>"
    assert (LanguageGameReward.success_reward, LanguageGameReward.format_error_reward) == (1.0, -0.1)
    rng, entropy = seeding.np_random(3)
    assert isinstance(rng, seeding.RNG) and entropy == 3
    assert rng.integers(1000) == seeding.np_random(3)[0].integers(1000)
    with pytest.raises(ValueError):
        seeding.np_random(-1)


def test_run_and_print_episode_single_and_vector(capsys, count_registry):
    from gem.utils.debug import (
        run_and_print_episode,
        run_and_print_episode_with_random_selection,
        run_and_print_episode_with_selective_step,
    )

    run_and_print_episode(CountEnv(high=1), lambda obs: "\\boxed{1}")
    out = capsys.readouterr().out
    assert "Step 1" in out and "terminated:  True" in out and "Step 2" not in out
    envs = gem.make_vec(["test:Count-v0"] * 3)
    run_and_print_episode(envs, lambda obs: ["\\boxed{1}"] * 3, ignore_done=True, max_steps=3)
    assert "Step 3" in capsys.readouterr().out
    assert run_and_print_episode_with_random_selection is run_and_print_episode_with_selective_step
    run_and_print_episode_with_selective_step(envs, lambda obs: ["\\boxed{2}"] * 3, ignore_done=True, max_steps=4)
    assert "Step 4" in capsys.readouterr().out
    envs.close()


def test_per_env_reset_kwargs_the_reference_way():
    class Remembers(CountEnv):
        def reset(self, seed=None, **kwargs):
            self.kwargs = kwargs
            return super().reset(seed)

    vec = gem.vector.SyncVectorEnv([Remembers, Remembers])
    vec.reset(env1_kwargs={"idx": 3}, shared=True)
    assert vec.call("kwargs") == [{"shared": True}, {"shared": True, "idx": 3}]
    vec.close()


def test_a_constructor_seed_is_kept_where_the_reference_keeps_it():
    assert CountEnv(seed=5).seed == 5 and not hasattr(CountEnv(), "seed")


def test_a_partial_step_answers_in_the_order_of_the_dict_as_the_reference_oat_loop_reads_it():
    import numpy as np

    class Tagged(CountEnv):
        def __init__(self, tag: int) -> None:
            super().__init__(high=10, max_turns=5)
            self.tag = tag

        def step(self, action):
            _, reward, terminated, truncated, info = super().step(action)
            return f"env {self.tag}", float(self.tag), terminated, truncated, {**info, "tag": self.tag}

    vec = gem.vector.SyncVectorEnv([lambda t=t: Tagged(t) for t in range(3)])
    vec.reset(seed=0)
    done = np.array([False, True, False])
    actions = iter(["\\boxed{1}", "\\boxed{2}"])
    next_obs, reward, terminated, truncated, info = vec.step({i: next(actions) for i, d in enumerate(done) if not d})
    assert next_obs == ["env 0", "env 2"] and reward.tolist() == [0.0, 2.0] and [i["tag"] for i in info] == [0, 2]
    cur_done = terminated | truncated | np.array([False, False])
    assert cur_done.shape == (2,)
    assert [len(o) for o in next_obs] == [5, 5]
    vec.close()
