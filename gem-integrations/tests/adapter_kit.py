"""Helpers shared by the adapter tests (the fixtures live in conftest.py)."""

from __future__ import annotations

ENV_ID = "game:GuessTheNumber-v0-easy"


def secret_of(env_id: str, seed: int) -> int:
    """The number a seeded GuessTheNumber episode hides (the env's seeding makes it reproducible)."""
    import gem

    env = gem.make(env_id)
    env.reset(seed=seed)
    return env.unwrapped.secret


def readme_install(framework: str) -> list[str]:
    """The commands of examples/<framework>/README.md's install block (the ones the nox session runs)."""
    import re
    from pathlib import Path

    readme = Path(__file__).resolve().parents[2] / "examples" / framework / "README.md"
    block = re.search(r"<!-- install -->\s*```bash\n(.*?)```\s*<!-- /install -->", readme.read_text(), re.S)
    assert block, f"{readme} has no install block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.split("#")[0].strip()]


def assert_missing_framework_is_one_line(framework: str, hidden: str) -> None:
    """Importing ``gem_integrations.<framework>`` with ``hidden`` unimportable fails with one
    line ending in the example README's install commands."""
    import subprocess
    import sys

    code = (f"import sys; sys.modules[{hidden!r}] = None\n"
            f"try:\n    import gem_integrations.{framework}\nexcept ImportError as e:\n    print(e)")
    message = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert message.startswith(f"gem_integrations.{framework} needs ") and "\n" not in message
    assert message.endswith(" && ".join(readme_install(framework)))


# -- the fault matrix every adapter's tests play (issue 38): gem.testing.envs.FaultyEnv fails on these actions --
#: fault -> (the action that causes it, where the env must live for it, info["failure"]["type"] it reports).
#: "die" kills the process running the env, so it is played only with host="process" (a dying worker)
FAULTS = {
    "raise": ("raise", "thread", "RuntimeError"),
    "hang": ("hang", "thread", "StepTimeout"),
    "die": ("die", "process", "WorkerDied"),
}
#: the step timeout the fault tests give the adapters (seconds)
FAULT_STEP_TIMEOUT = 1.0
FAULTY_ID = "test:Faulty-v0"


def register_faulty(registry) -> str:
    """Register FaultyEnv (a GuessTheNumber over 1..10 that raises, hangs or dies on command) as FAULTY_ID."""
    registry.register(FAULTY_ID, "gem.testing.envs:FaultyEnv")
    return FAULTY_ID


def assert_ended_by(info: dict, fault: str) -> None:
    """``info`` is that of a step that ``fault`` ended: the failure named, with its cause."""
    failure = info["failure"]
    assert failure["type"] == FAULTS[fault][2], failure
    if fault == "hang":
        assert f"within {FAULT_STEP_TIMEOUT} s" in failure["message"]


def failing_seed_env(fault: str, failing_seed: int = 0):
    """An env factory (picklable, its id known in a fresh worker) whose episodes from ``failing_seed``
    meet ``fault`` on their first step whatever the model says (gem.testing.envs.FailingSeedEnv)."""
    from gem.factory import EnvFactory

    return EnvFactory("test:FailingSeed-v0", {"fault": FAULTS[fault][0], "failing_seed": failing_seed},
                      entry_point="gem.testing.envs:FailingSeedEnv")
