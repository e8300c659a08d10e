"""Lines of the reference's own tests and examples, written the way a reference user
writes them, against gem-core alone (suite-specific ones live in each suite's
test_reference_compat_*.py)."""

import gem
from gem.data import DatasetEnv, Records


class Echo(DatasetEnv):
    def pose(self, record):
        return record["question"]

    def step(self, action):
        return "", float(action == self.record["answer"]), True, True, {}


ROWS = [{"question": "q0", "answer": "a0"}, {"question": "q1", "answer": "a1"}]


def test_gem_envs_is_an_attribute_after_import_gem():
    # the reference's gem/__init__ imports gem.envs, so scripts write gem.envs.registration...
    assert gem.envs.registration.ENV_REGISTRY is not None


def test_dataset_column_access_as_a_hugging_face_dataset():
    # test_qa's evaluate_llm: obss = env.dataset.select(range(n))[question_key]
    records = Records("toy", ROWS)
    assert records.select(range(1))["question"] == ["q0"]
    assert records["answer"] == ["a0", "a1"]


def test_assigned_record_is_graded_without_reset_and_undone_by_reset():
    # test_math/test_qa evaluation loops: env.answer = gold; env.step(response) with no reset
    env = Echo(ROWS, shuffle=False)
    env.record = {"question": "q", "answer": "gold"}
    assert env.step("gold")[1] == 1.0
    env.reset()
    assert env.record == ROWS[0]


def test_a_seed_in_env_kwargs_is_that_envs_reset_seed(count_registry):
    own = {"seed": 7}
    with gem.make_vec(["test:Count-v0-hard"] * 2, backend="sync") as envs:
        obs, _ = envs.reset(env1_kwargs=own)
    assert obs[1] == gem.make("test:Count-v0-hard").reset(seed=7)[0] and own == {"seed": 7}
