"""The memory plan (issue 35, point 3): python -m gem_train.plan reads a model's config.json (no weights) and says
per GPU what a config needs, exiting 1 with the fields to change when it does not fit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gem_train.plan import _KEPT, ASLEEP, PUBLISHED, SYNC, GiB, Shape, main, parse_size, peak, plan

#: the shapes of the paper's models (their published config.json, the fields the plan reads)
QWEN3 = {"1.7B": PUBLISHED["Qwen/Qwen3-1.7B-Base"], "4B": PUBLISHED["Qwen/Qwen3-4B-Base"]}


def _config(*overrides):
    from hydra import compose, initialize_config_module

    from gem_train.cli import to_train_config

    with initialize_config_module("gem_train.conf", version_base="1.3"):
        return to_train_config(compose("config", overrides=list(overrides)))


def model_dir(tmp_path, size):
    folder = tmp_path / f"Qwen3-{size}-Base"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3", **QWEN3[size]}))
    return folder


def test_the_parameter_count_is_the_models():
    assert abs(Shape.from_config(QWEN3["1.7B"]).parameters / 1e9 - 1.72) < 0.03  # Qwen3-1.7B: 1.7B with embeddings
    assert abs(Shape.from_config(QWEN3["4B"]).parameters / 1e9 - 4.02) < 0.05
    assert parse_size("80GiB") == 80 * GiB and parse_size("141GB") == 141 * 10**9 and parse_size("80") == 80 * GiB


def test_a_paper_preset_on_qwen3_1_7b_fits_80gb_and_an_absurd_token_budget_does_not(tmp_path, capsys):
    path = model_dir(tmp_path, "1.7B")
    assert main(["experiment=paper_games", f"model.path={path}"]) == 0
    out = capsys.readouterr().out
    assert "master weights (float32)" in out and "AdamW moments" in out and out.strip().endswith("fits")
    assert main(["experiment=paper_games", f"model.path={path}", "trainer.micro_batch_tokens=4000000"]) == 1
    out = capsys.readouterr().out
    assert "does not fit; change:" in out and "trainer.micro_batch_tokens (now 4000000" in out


def test_the_plan_says_what_the_checkpoints_take_on_disk(tmp_path, capsys):
    """A paper preset's checkpoint holds the float32 weights, AdamW's moments and the bf16 serving copy (Qwen3-1.7B:
    14 bytes a parameter, 22.4 GiB); ten in 500 iterations, the newest two kept."""
    path = model_dir(tmp_path, "1.7B")
    assert main(["experiment=paper_games", f"model.path={path}"]) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if text.startswith("checkpoints on disk"))
    size = 14 * Shape.from_config(QWEN3["1.7B"]).parameters / GiB
    assert f"{size:.1f} GiB each (float32 weights, AdamW moments, bfloat16 serving copy)" in line
    assert f"10 in 500 iterations, the newest 2 kept: {2 * size:.1f} GiB, {3 * size:.1f} GiB while" in line
    assert main(["experiment=paper_games", f"model.path={path}", "trainer.keep_checkpoints=null"]) == 0
    assert "10 kept" in capsys.readouterr().out
    assert main(["experiment=paper_games", f"model.path={path}", "trainer.checkpoint_every=null"]) == 0
    assert "checkpoints on disk: none (trainer.checkpoint_every=null)" in capsys.readouterr().out


def test_without_gradient_checkpointing_and_chunks_the_plan_says_to_turn_them_on(tmp_path, capsys):
    path = model_dir(tmp_path, "1.7B")
    assert main(["experiment=paper_games", f"model.path={path}", "trainer.gradient_checkpointing=false",
                 "trainer.logprob_chunk=null"]) == 1
    out = capsys.readouterr().out
    assert "trainer.gradient_checkpointing=true" in out and "trainer.logprob_chunk=1024" in out


def test_qwen3_4b_fits_80gb_because_vllm_sleeps_during_the_update(tmp_path, capsys):
    """The peak is the largest phase: the update (every learner row, vLLM asleep), generation (the learner's
    weights and moments beside vLLM's share) or the weight sync. 4B: 77 GiB at a 0.4 share; a 0.6 share does not
    fit, and the plan names the share."""
    path = model_dir(tmp_path, "4B")
    assert main(["experiment=paper_math", f"model.path={path}"]) == 0
    assert "asleep in updates" in capsys.readouterr().out
    assert main(["experiment=paper_math", f"model.path={path}", "rollout.vllm.gpu_memory_utilization=0.6"]) == 1
    assert "rollout.vllm.gpu_memory_utilization (now 0.6" in capsys.readouterr().out
    assert main(["experiment=paper_math", f"model.path={path}", "rollout.vllm.gpu_memory_utilization=0.6",
                 "gpu_memory=141GB"]) == 0  # one H200


@pytest.mark.parametrize("preset", ["paper_games", "paper_reasoning_gym", "paper_math", "paper_code", "paper_qa"])
def test_every_shipped_paper_preset_fits_one_80gb_gpu(tmp_path, preset):
    size = "1.7B" if preset in ("paper_games", "paper_reasoning_gym") else "4B"
    assert main([f"experiment={preset}", f"model.path={model_dir(tmp_path, size)}"]) == 0


def test_the_command_line(tmp_path):
    path = model_dir(tmp_path, "1.7B")
    done = subprocess.run([sys.executable, "-m", "gem_train.plan", "experiment=paper_games", f"model.path={path}",
                           "gpu_memory=80GiB"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    missing = subprocess.run([sys.executable, "-m", "gem_train.plan", "experiment=paper_games",
                              f"model.path={tmp_path / 'nowhere'}"], capture_output=True, text=True, timeout=300)
    assert missing.returncode != 0 and "no config.json" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.parametrize("bad", ["gpu_memory=lots", "gpus=0", "gpus=two"])
def test_bad_plan_options_are_one_line(bad):
    with pytest.raises(SystemExit, match=r"^gem_train\.plan: (gpu_memory|gpus)"):
        main(["experiment=paper_games", "model.path=/nowhere", bad])


@pytest.mark.parametrize("preset", ["paper_games", "paper_reasoning_gym", "paper_math", "paper_code", "paper_qa"])
def test_before_the_download_the_plan_uses_the_presets_published_shape(tmp_path, preset, capsys, monkeypatch):
    """No model.path: the preset's hub model's published config.json fields (a researcher sizing a GPU before an
    8 GB download); the same rows as with the folder."""
    monkeypatch.chdir(tmp_path)  # no folder named like the hub model here
    assert main([f"experiment={preset}"]) == 0
    out = capsys.readouterr().out
    hub = "Qwen/Qwen3-1.7B-Base" if preset in ("paper_games", "paper_reasoning_gym") else "Qwen/Qwen3-4B-Base"
    assert f"{hub}'s published config.json: no model.path given" in out.splitlines()[0]
    folder = model_dir(tmp_path, hub.split("-")[1])
    assert main([f"experiment={preset}", f"model.path={folder}"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == out.splitlines()[1:]


@pytest.mark.parametrize(("args", "says"), [
    (["experiment=paper_mth"], "bad config: In 'config': Could not find 'experiment/paper_mth'; available options "
                               "in 'experiment': compare_guess_the_number, "),
    (["experiment=paper_math", "trainer.lr=fast"], "Error merging override trainer.lr=fast: Value 'fast'"),
    (["model=hf"], "bad config: model.path: model=hf needs the folder"),  # no preset, so no hub name to plan from
])
def test_a_config_that_does_not_compose_is_one_line_naming_what_exists(args, says):
    done = subprocess.run([sys.executable, "-m", "gem_train.plan", *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1 and done.stderr.startswith("gem_train.plan: ") and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_fsdp_divides_the_learners_weights_gradients_and_optimizer_by_the_gpus(tmp_path, capsys):
    path = model_dir(tmp_path, "4B")
    assert main(["experiment=paper_math", f"model.path={path}", "gpu_memory=40GiB"]) == 1
    assert "trainer.strategy=fsdp with more GPUs" in capsys.readouterr().out
    assert main(["experiment=paper_math", f"model.path={path}", "gpu_memory=40GiB", "trainer.strategy=fsdp",
                 "gpus=8", "rollout.vllm.gpu_memory_utilization=0.3"]) == 0
    assert "AdamW moments (float32, 1/8)" in capsys.readouterr().out


def test_the_weight_sync_adds_one_tensor_to_vllms_weights_not_a_copy_of_the_model_nor_the_kv_cache(tmp_path):
    """After the update vLLM wakes its weights alone (its KV cache after the load), and the weights stream in one
    tensor at a time: the sync holds the learner's masters and moments, vLLM's weights and the embedding in bf16.
    A whole bf16 copy beside the whole woken share, as the sync once made, would take 4B over 80 GB (15 + 30 + 32 +
    7.5 GiB); sharded, the gathered copy is counted, beside vLLM's weights and not its share."""
    path = model_dir(tmp_path, "4B")
    rows = dict(plan(_config("experiment=paper_math", f"model.path={path}"), 80 * GiB)[0])
    syncs = {n: b for n, b in rows.items() if n.startswith(SYNC)}
    weights, tensor = rows["autocast copies (bfloat16)"], 2 * 151936 * 2560
    assert sorted(syncs.values()) == [tensor, weights] and any("a tensor at a time" in n for n in syncs)
    kept = rows["master weights (float32)"] + rows["AdamW moments (float32)"]
    share = rows[next(n for n in rows if n.startswith(ASLEEP))]
    assert peak(list(rows.items())) == max(kept + share, kept + weights + tensor,
                                           sum(b for n, b in rows.items() if not n.startswith((ASLEEP, SYNC))))
    assert kept + share + weights > 80 * GiB  # what a whole copy at the sync, beside the whole share, would need
    sharded = dict(plan(_config("experiment=paper_math", f"model.path={path}", "trainer.strategy=fsdp"),
                        80 * GiB, gpus=2)[0])
    assert any(n.startswith(SYNC) and "gathered" in n and b == weights for n, b in sharded.items())
    kept = sum(b for n, b in sharded.items() if n.startswith(_KEPT))
    assert peak(list(sharded.items())) < kept + share + weights  # the gathered copy does not sit beside the share
