"""The comparison command: warm starts shared by the algorithms, finished runs skipped, figure and table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gem_train import compare
from gem_train.checkpoint import latest_checkpoint
from gem_train.compare import CompareConfig, main, parse, plan

TESTS = Path(__file__).parent
TOY = ["env=custom", "env.id=toy:Guess-v0", "env.entry_point=toy_env:ToyGuess", "env.demonstrator=toy_env:Bisect"]


def test_parse_names_a_bad_key():
    assert parse(["seeds=[3,4]", "jobs=1"]).seeds == [3, 4]
    with pytest.raises(SystemExit, match="seedz"):
        parse(["seedz=[1]"])
    with pytest.raises(SystemExit, match="jobs must be >= 1"):
        parse(["jobs=0"])


@pytest.mark.parametrize(("names", "says"), [
    (["experiments=[compare_sudok]"], "experiments: no experiment preset compare_sudok; known: baselines/code_mbpp, "),
    (["algos=[rebn,rebm]"], "algos: no algo preset rebm; known: grpo, ppo, rebn, rebn_ppo, reinforce, rloo"),
])
def test_a_misspelt_preset_stops_before_any_run_naming_those_that_exist(tmp_path, names, says):
    with pytest.raises(SystemExit, match=f"^gem_train.compare: {says}"):
        main([*names, f"out={tmp_path}"])
    assert not any(tmp_path.iterdir())  # no run started


def test_a_bad_override_stops_before_any_run_with_gem_trains_line_for_it(tmp_path):
    with pytest.raises(SystemExit, match=r"^compare_sudoku/sft/seed0: bad config: Error merging override "
                                         r"trainer.lr=fast: Value 'fast'"):
        main(["experiments=[compare_sudoku]", "algos=[rebn]", "seeds=[0]", "overrides=[trainer.lr=fast]",
              f"out={tmp_path}"])
    assert not any(tmp_path.iterdir())


def test_plan_starts_every_algorithm_from_its_seeds_warm_start(tmp_path):
    cfg = CompareConfig(experiments=["compare_sudoku", "compare_minesweeper"], algos=["rebn", "ppo"], seeds=[0, 1],
                        out=str(tmp_path))
    warm, runs = plan(cfg)
    assert len(warm) == 4 and len(runs) == 8
    for job in runs:
        start = tmp_path / job.experiment / "sft" / f"seed{job.seed}" / "checkpoints" / "iter_000000"
        assert f"model.path={start}" in job.args and "trainer.sft.episodes=0" in job.args
        assert f"algo={job.algo}" in job.args and f"trainer.seed={job.seed}" in job.args
    assert all("trainer.iterations=0" in job.args for job in warm)


def test_compare_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "cmp"
    overrides = ",".join([*TOY, "trainer.iterations=2", "trainer.eval_every=1", "trainer.eval_episodes=4"])
    args = ["experiments=[smoke]", "algos=[rebn,grpo]", "seeds=[0]", "jobs=2", f"out={out}",
            f"overrides=[{overrides}]", f"figure_copy={tmp_path / 'docs' / 'fig.png'}"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "3 runs to do" not in first  # the warm start runs first, then the two algorithms
    assert "1 runs to do" in first and "2 runs to do" in first
    assert (out / "compare.png").stat().st_size > 0 and (tmp_path / "docs" / "fig.png").exists()
    table = (out / "compare.md").read_text()
    assert "| `toy:Guess-v0` (smoke) |" in table and "ReBN" in table and "GRPO" in table  # a preset not compare_*
    where = table.splitlines()[-1]  # the warm start's and both runs' recorded environment, all the same here
    assert where.startswith("Ran on ") and " torch " in where and "differ" not in where
    results = json.loads((out / "compare.json").read_text())["results"]["smoke"]
    rebn, grpo = results["rebn"]["seeds"]["0"], results["grpo"]["seeds"]["0"]
    assert rebn["iterations"] == grpo["iterations"] == [0, 1, 2]
    # both start from the one warm start: the same model on the same held-out seeds
    assert rebn["eval_return"][0] == grpo["eval_return"][0]
    # a second call finds every run done and only redraws
    assert main(args) == 0
    assert "runs to do" not in capsys.readouterr().out
    # a run whose recorded config no longer matches what its arguments compose to (its preset was edited since:
    # here another discount) is run again, over its old folder, and the rest stay done
    for path in (out / "smoke" / "grpo" / "seed0" / "checkpoints").glob("*/trainer_state.json"):
        state = json.loads(path.read_text())
        state["config"]["algo"]["gamma"] = 0.5
        path.write_text(json.dumps(state))
    compare._composed_record.cache_clear()
    assert main(args) == 0
    third = capsys.readouterr().out
    assert "1 runs to do (1 done already)" in third and "grpo/seed0" in third
    rerun = latest_checkpoint(out / "smoke" / "grpo" / "seed0") / "trainer_state.json"
    assert json.loads(rerun.read_text())["config"]["algo"]["gamma"] != 0.5


def test_every_run_of_the_default_grid_composes_and_the_tool_envs_use_their_tool(tmp_path):
    from hydra import compose, initialize_config_module

    from gem_train.cli import to_train_config
    from gem_train.compare import TOOL_EXPERIMENTS

    cfg = CompareConfig(out=str(tmp_path))
    assert set(TOOL_EXPERIMENTS) <= set(cfg.experiments)
    warm, runs = plan(cfg)
    composed = {}
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        for job in [*warm, *runs]:
            composed[job.name] = to_train_config(compose("config", overrides=job.args))
    for job in runs:
        assert composed[job.name].algo.name == job.algo.replace("rebn_ppo", "rebn")
    wrappers = {job.experiment: composed[job.name].env.wrappers for job in warm}
    assert "python_tool" in wrappers["baselines/math_arithmetic_python"]
    assert composed[warm[-1].name].env.id.startswith("terminal:")
    # each env's warm start and its RL runs share everything but the algorithm
    for job in runs:
        start = composed[f"{job.experiment}/sft/seed{job.seed}"]
        assert (composed[job.name].env, composed[job.name].rollout) == (start.env, start.rollout)


def test_the_table_shows_format_errors_and_tool_calls_where_a_tool_was_called():
    from gem_train.compare import table

    def entry(start, final, calls):
        return {"start_eval_return": (start, 0.0), "final_eval_return": (final, 0.0),
                "start_eval_success": (start, 0.0), "final_eval_success": (final, 0.0),
                "start_eval_format_errors": (0.5, 0.0), "final_eval_format_errors": (0.1, 0.0),
                "start_eval_tool_calls": (calls[0], 0.0), "final_eval_tool_calls": (calls[1], 0.0)}

    results = {
        "compare_sudoku": {"env_id": "game:Sudoku-v0-easy", "label": "`game:Sudoku-v0-easy`",
                           "rebn": entry(0.1, 0.2, (0, 0)), "ppo": entry(0.1, 0.3, (0, 0))},
        "baselines/math_arithmetic_python": {
            "env_id": "math:Arithmetic-v0-easy", "label": "`math:Arithmetic-v0-easy` (baselines/x)",
            "rebn": entry(0.0, 0.0, (0.75, 0.94)), "ppo": entry(0.0, 0.0, (0.75, 0.5))}}
    text = table(results, ["rebn", "ppo"])
    assert "| `math:Arithmetic-v0-easy` (baselines/x) | 0.00 |" in text and "**0.30 ± 0.00**" in text
    assert text.startswith("| env | start (SFT) | ReBN | PPO |")
    assert table(results, ["rebn", "ppo"], warm_start=False).startswith("| env | start | ReBN | PPO |")  # the paper's
    tools = text.split("tool calls |", 1)[1]
    assert "0.50 → 0.10; 0.75 → 0.94" in tools and "0.75 → 0.50" in tools and "Sudoku" not in tools


def test_a_comparison_that_trains_nothing_exits_non_zero_and_warm_start_false_is_the_papers(tmp_path, monkeypatch,
                                                                                             capsys):
    """Issue 35, point 7: with trainer.sft.episodes=0 (no warm start, as the paper) the comparison started no RL
    run, printed an empty table and exited 0. It now says why and exits 1; warm_start=false runs the paper's
    protocol: every algorithm from the preset's own model, no warm start."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    overrides = ",".join([*TOY, "trainer.iterations=1", "trainer.eval_every=1", "trainer.eval_episodes=4",
                          "trainer.sft.episodes=0"])
    args = ["experiments=[smoke]", "algos=[rebn]", "seeds=[0]", "jobs=1", f"overrides=[{overrides}]"]
    assert main([*args, f"out={tmp_path / 'a'}"]) == 1
    err = capsys.readouterr().err
    assert "1 of 1 runs did not train" in err and "warm_start=false" in err
    warm, runs = plan(parse([*args, "warm_start=false", f"out={tmp_path / 'b'}"]))
    assert warm == [] and not any(a.startswith("model.path=") for a in runs[0].args)
    assert main([*args, "warm_start=false", f"out={tmp_path / 'b'}"]) == 0
    results = json.loads((tmp_path / "b" / "compare.json").read_text())["results"]["smoke"]
    assert results["rebn"]["seeds"]["0"]["iterations"] == [0, 1]


def _model_folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def test_the_paper_mode_gives_each_preset_its_own_model_and_no_warm_start(tmp_path):
    """Issue 35, point 7: scale=paper composes the paper scale into every run, each preset trains the model its
    hub_name names (from models=), and nothing is warm-started; a missing model stops the plan first."""
    models = tmp_path / "models"
    cfg = CompareConfig(experiments=["compare_guess_the_number", "baselines/math_arithmetic_python"],
                        algos=["rebn", "grpo"], seeds=[0], out=str(tmp_path / "out"), scale="paper",
                        models=str(models))
    with pytest.raises(SystemExit, match=r"compare_guess_the_number trains Qwen/Qwen3-1.7B-Base: no model at "):
        plan(cfg)
    small, large = _model_folder(models, "Qwen3-1.7B-Base"), _model_folder(models, "Qwen3-4B-Base")
    warm, runs = plan(cfg)
    assert warm == [] and len(runs) == 4
    for job in runs:
        assert "scale=paper" in job.args and "trainer.sft.episodes=0" in job.args
        # a job needs its last checkpoint alone (at 1.7B each is 22.4 GiB); the user's overrides come after
        assert job.args.index("trainer.keep_checkpoints=1") < job.args.index("experiment.console=false")
        folder = small if job.experiment.startswith("compare_") else large
        assert f"model.path={folder}" in job.args
    own = _model_folder(tmp_path / "mine", "Qwen3-4B-Base")  # a preset's own folder, over models=
    _, mine = plan(CompareConfig(experiments=["compare_sudoku"], algos=["rebn"], seeds=[0], scale="paper",
                                 models=str(models), model_paths={"compare_sudoku": str(own)}))
    assert f"model.path={own}" in mine[0].args
    with pytest.raises(SystemExit, match="compare_sudoku: no model at .*from model_paths"):
        plan(CompareConfig(experiments=["compare_sudoku"], scale="paper", models=str(models),
                           model_paths={"compare_sudoku": str(tmp_path / "none")}))
    with pytest.raises(SystemExit, match="scale=paper needs models="):
        plan(CompareConfig(experiments=["compare_sudoku"], scale="paper"))
    sim_warm, sim_runs = plan(CompareConfig(experiments=["compare_sudoku"], algos=["rebn"], seeds=[0],
                                            scale="paper_sim", out=str(tmp_path / "sim")))
    assert sim_warm == [] and "scale=paper_sim" in sim_runs[0].args


@pytest.mark.parametrize("preset", ["compare_guess_the_number", "compare_letter_counting", "compare_sudoku",
                                    "compare_minesweeper"])
def test_the_compare_presets_take_a_scale(preset):
    from hydra import compose, initialize_config_module

    from gem_train.cli import to_train_config

    with initialize_config_module("gem_train.conf", version_base="1.3"):
        tiny = to_train_config(compose("config", overrides=[f"experiment={preset}"]))
        paper = to_train_config(compose("config", overrides=[f"experiment={preset}", "scale=paper", "model.path=/m"]))
        sim = to_train_config(compose("config", overrides=[f"experiment={preset}", "scale=paper_sim"]))
    assert tiny.model.name == "tiny" and tiny.trainer.sft.episodes > 0  # the preset's own CPU budget, as before
    assert (paper.model.name, paper.trainer.iterations, paper.rollout.carry_over) == ("hf", 500, True)
    assert (sim.model.tiny.architecture, sim.trainer.sft.episodes) == ("qwen3", 0)
    assert tiny.env.id == paper.env.id == sim.env.id and paper.model.hub_name == "Qwen/Qwen3-1.7B-Base"


def test_each_run_gets_its_own_gpus(monkeypatch, tmp_path):
    """Visible GPUs are cut into disjoint slices, one per concurrent run (CUDA_VISIBLE_DEVICES in its
    environment); a run with several GPUs runs under torchrun, one rank each. No GPU here: the assignment is
    checked on the commands the runner would start."""
    from gem_train.compare import Job, gpu_slices, job_command, run_all

    assert gpu_slices(["0", "1", "2", "3"], 1) == [["0"], ["1"], ["2"], ["3"]]
    assert gpu_slices(["0", "1", "2"], 2) == [["0", "1"]]
    job = Job("e", "rebn", 0, tmp_path / "j", ["experiment=smoke"])
    command, env = job_command(job, ["2", "3"])
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and "--nproc_per_node=2" in command
    command, env = job_command(job, ["1"])
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and command[1:3] == ["-m", "gem_train"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    given: list[str] = []

    def fake_run(job, gpus=None):
        given.append(",".join(gpus))
        return job, 0, 0.0

    monkeypatch.setattr(compare, "run_job", fake_run)
    jobs = [Job("e", "rebn", s, tmp_path / f"j{s}", [f"trainer.seed={s}"]) for s in range(6)]
    assert run_all(jobs, workers=8, gpus_per_job=2) == []
    assert len(given) == 6 and set(given) <= {"4,5", "6,7"}
    with pytest.raises(SystemExit, match="gpus_per_job=8 but only 4 GPUs"):
        run_all(jobs, workers=1, gpus_per_job=8)
