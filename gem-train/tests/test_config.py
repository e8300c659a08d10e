"""The Hydra app composes typed configs; bad values name the field and the reason."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from gem_train.cli import run, to_train_config
from gem_train.config import ConfigError, TrainConfig, check_model_path, validate


def composed(*overrides: str) -> TrainConfig:
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        return to_train_config(compose("config", overrides=list(overrides)))


def test_default_config_is_the_main_job():
    cfg = composed()
    assert cfg.env.id == "game:GuessTheNumber-v0-easy"
    assert (cfg.algo.name, cfg.algo.loss, cfg.model.name, cfg.rollout.engine) == ("rebn", "reinforce", "tiny", "hf")
    assert cfg.trainer.sft.episodes > 0  # the warm start from the games' solver
    assert cfg.experiment.output_dir == "runs/guess_the_number"


def test_groups_and_overrides_compose():
    cfg = composed("algo=grpo", "rollout=vllm", "experiment=smoke", "trainer.lr=0.01")
    assert (cfg.algo.name, cfg.algo.group_size, cfg.algo.loss) == ("grpo", 4, "ppo_clip")
    assert cfg.rollout.engine == "vllm" and cfg.trainer.lr == 0.01
    assert cfg.trainer.iterations == 2 and cfg.experiment.output_dir == "runs/smoke"
    assert composed("algo=rebn_ppo").algo.epochs == 4


def test_rollout_env_limits_compose_and_self_play_takes_the_timeouts_but_not_processes():
    cfg = composed("rollout.step_timeout=30", "rollout.episode_timeout=600", "rollout.processes=2")
    assert (cfg.rollout.step_timeout, cfg.rollout.episode_timeout, cfg.rollout.processes) == (30.0, 600.0, 2)
    validate(cfg)
    cfg.env.selfplay = True
    with pytest.raises(ConfigError, match=r"^rollout\.processes: self-play games run under gem's multi-agent"):
        validate(cfg)
    cfg.rollout.processes = None
    validate(cfg)


def test_wrong_type_and_unknown_key_name_the_field():
    with pytest.raises(ConfigCompositionException, match="algo.gamma=abc") as bad_type:
        composed("algo.gamma=abc")
    assert isinstance(bad_type.value.__cause__, ValidationError)
    assert "full_key: algo.gamma" in str(bad_type.value.__cause__) and "Float" in str(bad_type.value.__cause__)
    with pytest.raises(ConfigCompositionException, match="algo.gama") as unknown:
        composed("algo.gama=0.5")
    assert "Key 'gama' not in 'AlgoConfig'" in str(unknown.value.__cause__)


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("algo.gamma", 1.5, "discount"),
        ("algo.name", "ppo2", "one of grpo, ppo, rebn, reinforce, rloo"),
        ("algo.tis_cap", 0.5, "below 1"),
        ("rollout.temperature", 0.0, "temperature > 0"),
        ("model.max_model_len", 16, "rollout.max_tokens"),
        ("trainer.sft.noise", 2.0, "probability"),
        ("trainer.adam_betas", [0.9, 1.5], "two numbers in"),
        ("rollout.turns_per_iter", 0, ">= 1 or null"),
        ("rollout.step_timeout", 0.0, "> 0 seconds or null"),
        ("rollout.episode_timeout", -1.0, "> 0 seconds or null"),
        ("rollout.processes", 0, ">= 1 or null"),
        ("trainer.checkpoint_every", -1, r">= 0 \(0: only at the end\) or null"),
        ("trainer.keep_checkpoints", 0, ">= 1 or null"),
    ],
)
def test_validate_names_the_field_and_why(field, value, why):
    cfg = TrainConfig()
    section, *rest = field.split(".")
    target = getattr(cfg, section)
    for part in rest[:-1]:
        target = getattr(target, part)
    setattr(target, rest[-1], value)
    with pytest.raises(ConfigError, match=rf"^{field}: .*{why}"):
        validate(cfg)


def test_combinations_are_checked():
    cfg = TrainConfig()
    cfg.algo = dataclasses.replace(cfg.algo, name="grpo", group_size=1, gamma=1.0)
    with pytest.raises(ConfigError, match="^algo.group_size: grpo"):
        validate(cfg)
    cfg = TrainConfig()
    cfg.algo = dataclasses.replace(cfg.algo, loss="ppo_clip", tis_cap=2.0)
    with pytest.raises(ConfigError, match="^algo.tis_cap"):
        validate(cfg)
    cfg = TrainConfig()
    cfg.rollout.engine = "vllm"
    cfg.model.tiny.num_heads = 4  # head_dim 16
    with pytest.raises(ConfigError, match="head_dim >= 32"):
        validate(cfg)
    with pytest.raises(ConfigError, match="^model.path: model=hf needs"):
        validate(composed("model=hf"))


def test_every_schema_field_has_a_comment():
    import inspect

    from gem_train import config

    source = inspect.getsource(config).splitlines()
    for cls in (config.EnvConfig, config.AlgoConfig, config.TinyModelConfig, config.ModelConfig, config.VLLMConfig,
                config.RolloutConfig, config.SFTConfig, config.TrainerConfig, config.ExperimentConfig):
        for f in dataclasses.fields(cls):
            line = next(i for i, text in enumerate(source) if text.strip().startswith(f"{f.name}:")
                        and i > next(j for j, t in enumerate(source) if t.startswith(f"class {cls.__name__}")))
            assert source[line - 1].strip().startswith("#"), f"{cls.__name__}.{f.name} has no comment above it"


def test_cli_reports_a_bad_value_and_exits_nonzero(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # Hydra makes its run folder under the working directory
    assert run(["algo.gamma=2"]) == 1
    assert "algo.gamma: a discount must lie in [0, 1], got 2.0" in capsys.readouterr().err


PRESETS = ["paper_games", "paper_reasoning_gym", "paper_math", "paper_code", "paper_qa"]


@pytest.mark.parametrize("preset", PRESETS)
def test_paper_presets_compose_and_validate(preset):
    cfg = composed(f"experiment={preset}", "model.path=/models/qwen3")
    validate(cfg)
    small = preset in ("paper_games", "paper_reasoning_gym")
    assert cfg.model.hub_name == ("Qwen/Qwen3-1.7B-Base" if small else "Qwen/Qwen3-4B-Base")
    assert (cfg.model.name, cfg.rollout.engine, cfg.algo.name) == ("hf", "vllm_async", "rebn")
    assert cfg.rollout.carry_over and cfg.rollout.max_staleness == 1  # continuous batching across iterations
    assert cfg.algo.gamma == (0.9 if preset in ("paper_games", "paper_qa") else 1.0)
    t, r = cfg.trainer, cfg.rollout
    assert (t.lr, t.weight_decay, t.adam_betas, t.max_grad_norm, t.iterations) == (1e-6, 0.0, [0.9, 0.95], 1.0, 500)
    assert (r.max_tokens, r.temperature, r.turns_per_iter) == (4096, 1.0, 128)
    assert cfg.trainer.sft.episodes == 0 and cfg.experiment.output_dir == f"runs/{preset}"


@pytest.mark.parametrize("preset", PRESETS)
def test_paper_presets_without_weights_name_model_path(preset, tmp_path):
    with pytest.raises(ConfigError, match=r"^model.path: model=hf needs .*tuned for Qwen/Qwen3-.*gem_train\.plan"):
        composed(f"experiment={preset}")
    cfg = composed(f"experiment={preset}", f"model.path={tmp_path / 'absent'}")
    with pytest.raises(ConfigError, match=r"^model.path: no Hugging Face model folder at .*absent"):
        check_model_path(cfg)


def test_cli_stops_a_preset_whose_weights_are_absent(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert run(["experiment=paper_games", f"model.path={tmp_path / 'absent'}"]) == 1
    err = capsys.readouterr().err
    assert "model.path: no Hugging Face model folder" in err and "Qwen/Qwen3-1.7B-Base" in err
