import pytest

from gem.errors import UnknownWrapperError
from gem.testing import check_env
from gem.testing.envs import CountEnv
from gem.wrappers import HistoryWrapper, ObservationWrapper, TimeLimit, get_wrapper_fns


class ChatMLTemplate:
    """The one method of a HF tokenizer the history wrapper uses (transformers is not
    a gem-core dependency; gem-train's tests run this wrapper with a real tokenizer)."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def play(env, actions):
    observations = [env.reset(seed=0)[0]]
    for action in actions:
        observations.append(env.step(action)[0])
    return observations


def test_concat_shows_observations_only():
    obs = play(HistoryWrapper(CountEnv(high=100, max_turns=9), mode="concat"), ["\\boxed{1}", "\\boxed{2}"])
    assert obs[-1].count("Wrong") == 2 and "\\boxed{1}" not in obs[-1]
    assert obs[-1].startswith("Guess a number")


def test_concat_with_action_interleaves():
    obs = play(HistoryWrapper(CountEnv(high=100, max_turns=9)), ["\\boxed{1}", "\\boxed{2}"])
    lines = obs[-1].splitlines()
    assert lines[1] == "\\boxed{1}" and lines[3] == "\\boxed{2}" and lines[2].startswith("Wrong")


def test_concat_chat_renders_the_template_with_a_generation_prompt():
    env = HistoryWrapper(CountEnv(high=100, max_turns=9), mode="concat_chat", tokenizer=ChatMLTemplate())
    obs = play(env, ["\\boxed{1}"])
    assert obs[-1].count("<|im_start|>user") == 2 and obs[-1].endswith("<|im_start|>assistant\n")
    assert "<|im_start|>assistant\n\\boxed{1}<|im_end|>" in obs[-1]


def test_concat_chat_on_reset_templates_only_the_first_observation():
    env = HistoryWrapper(CountEnv(high=100, max_turns=9), mode="concat_chat_on_reset", tokenizer=ChatMLTemplate())
    obs = play(env, ["\\boxed{1}"])
    assert obs[0].startswith("<|im_start|>user") and obs[-1].count("<|im_start|>") == 2


def test_messages_mode_returns_the_message_list_with_system_prompt():
    env = HistoryWrapper(CountEnv(high=100, max_turns=9), mode="messages", system_prompt="Be brief.")
    msgs = play(env, ["\\boxed{1}"])[-1]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == "\\boxed{1}"


def test_prefix_suffix_and_max_history():
    class Prefixed(CountEnv):
        def step(self, action):
            obs, r, t, tr, info = super().step(action)
            return obs, r, t, tr, {**info, "prefix": "P:", "suffix": ":S"}

    env = HistoryWrapper(Prefixed(high=100, max_turns=9), mode="concat_with_action", max_history_length=1)
    obs = play(env, ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"])[-1]
    assert obs.startswith("P:") and obs.endswith(":S")
    assert "\\boxed{1}" not in obs and "\\boxed{3}" in obs


def test_latest_and_messages_put_the_suffix_on_its_own_line():
    class Boarded(CountEnv):
        def reset(self, seed=None, **kwargs):
            obs, info = super().reset(seed, **kwargs)
            return obs, {**info, "suffix": "Board A"}

        def step(self, action):
            obs, r, t, tr, info = super().step(action)
            return obs, r, t, tr, {**info, "suffix": "Board B"}

    latest = HistoryWrapper(Boarded(high=100, max_turns=9), mode="latest")
    first, second = play(latest, ["\\boxed{1}"])
    env = Boarded(high=100, max_turns=9)
    start, _ = env.reset(seed=0)
    after = env.step("\\boxed{1}")[0]
    assert (first, second) == (f"{start}\nBoard A", f"{after}\nBoard B")  # no history, the board once
    msgs = play(HistoryWrapper(Boarded(high=100, max_turns=9), mode="messages"), ["\\boxed{1}"])[-1]
    assert msgs[-1]["content"] == f"{after}\nBoard B" and msgs[0]["content"] == start


def test_reference_constructor_maps_to_modes():
    assert ObservationWrapper(CountEnv(), include_chat_template=False).mode == "concat_with_action"
    assert ObservationWrapper(CountEnv(), include_action=False, include_chat_template=False).mode == "concat"
    with pytest.raises(ValueError):
        ObservationWrapper(CountEnv(), include_chat_template=True, apply_chat_template_on_reset=True)


def test_get_wrapper_fns_resolves_gem_names_and_needs_tokenizers():
    fns = get_wrapper_fns("concat_chat,episode_tracking", tokenizer=ChatMLTemplate())
    env = CountEnv()
    for fn in fns:
        env = fn(env)
    assert env.reset(seed=0)[0].startswith("<|im_start|>user")
    # as in the reference: asked for without a tokenizer, the wrapper comes back as is and
    # needs one when applied
    (chat,) = get_wrapper_fns("concat_chat")
    with pytest.raises(ValueError, match="needs a tokenizer"):
        chat(CountEnv())
    assert chat(CountEnv(), tokenizer=ChatMLTemplate()).reset(seed=0)[0].startswith("<|im_start|>user")
    with pytest.raises(UnknownWrapperError, match="Did you mean 'concat_chat'"):
        get_wrapper_fns("concat_caht")


def test_time_limit_and_episode_tracking():
    env = get_wrapper_fns("episode_tracking")[0](TimeLimit(CountEnv(high=1000, max_turns=100), max_steps=2))
    env.reset(seed=0)
    env.step("\\boxed{0}")
    _, _, terminated, truncated, info = env.step("\\boxed{0}")
    assert truncated and not terminated and info["time_limit"]
    assert info["episode"] == {"length": 2, "return": 0.0}


def test_wrapped_envs_pass_check_env():
    check_env(TimeLimit(CountEnv(), max_steps=3))
    check_env(HistoryWrapper(CountEnv(), mode="concat_with_action"))
    check_env(get_wrapper_fns("answer_boxed")[0](CountEnv()))
