"""Steps per second of every game preset under random actions, against the reference
package on the same machine in the same run, and the cost of hostile actions.

Three tables:

1. every preset against gem-core's trivial ``CountEnv``, measured by the same loop: the
   gap is the game's own cost (move parsing, rules, board rendering, and puzzle
   generation at each reset);
2. ours / reference on the reference's hard presets, in two loops: episodes that go on
   with ``reset()`` (the env's own stream) and reset-heavy ones that start every episode
   with ``reset(seed=i)`` (a fresh seed each, as a trainer's episodes are seeded). The
   reference package (PyPI ``gem-llm``, repository axon-rl/gem) runs in its own
   interpreter, given by ``--reference-python`` or ``$GEM_REFERENCE_PYTHON``, as a worker
   that measures with this file's own loop; ours is measured by the same worker under this
   interpreter. Each preset gets a fresh worker per side (neither carries the first
   table's heap nor another preset's); the two sides take turns, ``--repeats`` times each
   loop, and the best rate of each side counts (the machine is shared: the best run is the
   one least disturbed). Without a reference interpreter the table is skipped with a note;
3. with ``--hostile``: one step's time on hostile actions of n and 4n characters per
   game; a linear parser shows a ratio near 4, a quadratic one near 16.

A reference interpreter, kept out of this repository (the game envs need numpy,
reasoning-gym, pandas and nltk)::

    python -m venv /tmp/gem-ref && /tmp/gem-ref/bin/pip install -e /path/to/axon-rl/gem --no-deps
    /tmp/gem-ref/bin/pip install numpy reasoning-gym pandas nltk==3.9.1

The reference's Wordle, Hangman and WordSearch read nltk's ``words`` corpus, which nltk
downloads at run time and this machine cannot. Its worker is given one built offline
(``$NLTK_DATA``, :func:`nltk_words_corpus`): ``en`` is the web2 word list (the list nltk
ships as ``en``) from the ``english-words`` package our games use, and ``en-basic`` (Ogden's
850 words of Basic English in nltk) is a stand-in of the same size, our 850 most frequent
dictionary words. The speed of the same rules on lists of the same size is compared, not
which words are secrets.

    python gem-envs-games/bench/bench_games.py [--seconds 0.3] [--reference-python /tmp/gem-ref/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from typing import Any

import gem

#: hard preset of every family the reference package registers
REFERENCE_IDS = [
    f"game:{family}-v0-hard"
    for family in (
        "GuessTheNumber", "Mastermind", "Minesweeper", "Wordle", "Hangman", "Crosswords", "WordSearch",
        "FifteenPuzzle", "Sudoku", "TowerofHanoi", "Game2048", "Sokoban",
    )
]


def _shared_sampler(env_id: str) -> Any:
    """Random moves for the families the reference package has no ``sample_random_action``
    for; both sides then play the same kind of moves (the format both read)."""
    rng = random.Random(0)
    if "Sudoku" in env_id:
        return lambda env: f"\\boxed{{{rng.randint(1, 9)} {rng.randint(1, 9)} {rng.randint(1, 9)}}}"
    if "TowerofHanoi" in env_id:
        return lambda env: "\\boxed{" + " ".join(rng.sample("ABC", 2)) + "}"
    return None


def rate(env: Any, seconds: float, sample: Any = None, seeded: bool = False) -> tuple[float, float]:
    """(steps/s, resets/s) playing random actions for ``seconds`` (resets included in
    the steps' time, as an episode loop pays them). Episodes after the first start with
    ``reset()``, or with ``reset(seed=i)`` for the i-th episode when ``seeded``.

    Seconds are CPU seconds of this process (``time.process_time``): on a shared
    machine, wall time mostly measures the other processes' load."""
    sample = sample or (lambda e: e.sample_random_action())
    clock = time.process_time
    env.reset(seed=0)  # outside the clock: the first reset may build word lists or tables
    steps = resets = 0
    reset_time = 0.0
    start = clock()
    while clock() - start < seconds:
        _, _, terminated, truncated, _ = env.step(sample(env))
        steps += 1
        if terminated or truncated:
            resets += 1
            t = clock()
            if seeded:
                env.reset(seed=resets)
            else:
                env.reset()
            reset_time += clock() - t
    elapsed = clock() - start
    return steps / elapsed, (resets / reset_time if reset_time else float("nan"))


def measure(env_id: str, seconds: float, seeded: bool = False) -> dict[str, Any]:
    """One measurement of ``env_id`` with whichever ``gem`` this interpreter imports."""
    try:
        env = gem.make(env_id)
        steps, resets = rate(env, seconds, _shared_sampler(env_id), seeded)
    except Exception as error:  # the reference cannot run some of its envs offline
        return {"id": env_id, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:90]}"}
    return {"id": env_id, "steps": steps, "resets": resets}


def worker(seconds: float) -> None:
    """Answer one JSON line per ``env_id [seeded]`` line read from stdin (run with the
    reference's python for its side)."""
    import logging

    logging.disable(logging.INFO)  # the reference logs every make
    for line in sys.stdin:
        env_id, *loop = line.split()
        print(json.dumps(measure(env_id, seconds, loop == ["seeded"])), flush=True)


#: the size of nltk's ``en-basic`` list (Ogden's Basic English)
BASIC_ENGLISH_SIZE = 850


def nltk_words_corpus(root: str) -> str:
    """Write nltk's ``words`` corpus under ``root`` (an ``$NLTK_DATA`` directory) from the
    word lists installed with our games: ``en`` = web2, ``en-basic`` = a same-size stand-in."""
    from english_words import get_english_words_set

    from gem_envs_games import words

    folder = os.path.join(root, "corpora", "words")
    os.makedirs(folder, exist_ok=True)
    web2 = sorted(get_english_words_set(["web2"], lower=False, alpha=True), key=lambda w: (w.lower(), w))
    dictionary = words._dictionary_words()
    basic = [w for w in words._ranked_words() if w in dictionary][:BASIC_ENGLISH_SIZE]
    for name, entries in (("en", web2), ("en-basic", sorted(basic))):
        with open(os.path.join(folder, name), "w", encoding="ascii") as out:
            out.write("\n".join(w for w in entries if w.isascii()) + "\n")
    return root


class Worker:
    """A worker process measuring envs with the ``gem`` that ``python`` imports (ours or the reference's)."""

    def __init__(self, python: str, seconds: float, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [python, os.path.abspath(__file__), "--worker", "--seconds", str(seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, **(env or {})},
        )

    def measure(self, env_id: str, seeded: bool = False) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(env_id + (" seeded\n" if seeded else "\n"))
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"id": env_id, "error": "the reference worker exited"}

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def against_baseline(pattern: str, seconds: float) -> None:
    from gem.testing.envs import CountEnv

    baseline, baseline_resets = rate(CountEnv(), seconds)
    print(f"{'env id':<36} {'steps/s':>10} {'vs baseline':>12} {'resets/s':>10}")
    print(f"{'baseline: gem.testing CountEnv':<36} {baseline:>10,.0f} {1.0:>11.2f}x {baseline_resets:>10,.0f}")
    for env_id in gem.list_envs(pattern):
        env = gem.make(env_id)
        steps, resets = rate(env, seconds)
        env.close()
        print(f"{env_id:<36} {steps:>10,.0f} {steps / baseline:>11.3f}x {resets:>10,.0f}")


def against_reference(env_ids: list[str], python: str | None, seconds: float, repeats: int) -> None:
    print("\nours / reference (hard presets, random actions, steps per CPU second; each preset in a fresh worker"
          f" process per side, best of {repeats} alternating runs per loop; 'reset()': episodes continue the"
          " env's stream, 'reset(seed=i)': every episode seeded afresh)")
    if not python or not os.path.exists(python):
        print("  skipped: no reference interpreter (give --reference-python or set $GEM_REFERENCE_PYTHON;"
              " see this file's docstring for how to make one)")
        return
    loops = {"reset()": False, "reset(seed=i)": True}
    print(f"{'':<28}" + "".join(f" {name:^33}" for name in loops))
    print(f"{'env id':<28}" + f" {'ours':>10} {'reference':>10} {'ratio':>10}" * len(loops))
    with tempfile.TemporaryDirectory(prefix="gem-bench-nltk-") as corpus:
        nltk_data = {"NLTK_DATA": nltk_words_corpus(corpus)}
        for env_id in env_ids:
            # ours too in a worker: this process has made every preset above (heap, caches)
            ours_worker, reference = Worker(sys.executable, seconds), Worker(python, seconds, nltk_data)
            cells, note = [], ""
            try:
                for seeded in loops.values():
                    ours = theirs = 0.0
                    for _ in range(repeats):
                        ours = max(ours, ours_worker.measure(env_id, seeded).get("steps", 0.0))
                        answer = reference.measure(env_id, seeded)
                        if "error" in answer:
                            note = answer["error"]
                            break
                        theirs = max(theirs, answer["steps"])
                    shown, ratio = (f"{theirs:,.0f}", f"{ours / theirs:.2f}x") if theirs else ("-", "-")
                    cells.append(f" {ours:>10,.0f} {shown:>10} {ratio:>10}")
                    if note:
                        break
            finally:
                ours_worker.close()
                reference.close()
            print(f"{env_id:<28}" + "".join(cells) + (f"   reference skipped: {note}" if note else ""))


def hostile(size: int) -> None:
    """Time of one step on hostile boxes of ``size`` and ``4 * size`` characters."""
    shapes = {
        "spaces between fields": lambda n: "\\boxed{1" + " " * (n // 2) + "1" + " " * (n // 2) + "x}",
        "many numbers": lambda n: "\\boxed{" + "1 " * (n // 2) + "x}",
        "open braces": lambda n: "\\boxed{" + "{" * n,
        "words between towers": lambda n: "\\boxed{A " + "to " * (n // 3) + "B}",
    }
    print(f"\nhostile actions: CPU seconds per step at n = {size:,} characters (best of 3), and"
          " time(4n) / time(n): linear is about 4, quadratic 16; '-' where the step takes under a"
          " millisecond at both sizes (the box is refused before it is read through)")
    print(f"{'env id':<30} " + " ".join(f"{name:>24}" for name in shapes))
    for env_id in gem.list_envs("game:*-v0-easy"):
        env = gem.make(env_id)
        cells = []
        for make_action in shapes.values():
            times = []
            for n in (size, 4 * size):
                action = make_action(n)
                best = float("inf")
                for _ in range(3):
                    env.reset(seed=0)
                    start = time.process_time()
                    env.step(action)
                    best = min(best, time.process_time() - start)
                times.append(best)
            ratio = f"{times[1] / times[0]:5.1f}x" if max(times) >= 1e-3 else "    -"
            cells.append(f"{times[0]:.4f}s {ratio}")
        print(f"{env_id:<30} " + " ".join(f"{cell:>24}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pattern", nargs="?", default="game:*-v0-*", help="the envs every table measures")
    parser.add_argument("--seconds", type=float, default=0.3, help="measuring CPU time per env and run")
    parser.add_argument("--reference-python", default=os.environ.get("GEM_REFERENCE_PYTHON"),
                        help="python of a venv with the reference package (default: $GEM_REFERENCE_PYTHON)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per side against the reference")
    parser.add_argument("--hostile", action="store_true", help="also time hostile actions of n and 4n characters")
    parser.add_argument("--hostile-size", type=int, default=1 << 18, help="n for --hostile")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.seconds)
        return
    against_baseline(args.pattern, args.seconds)
    selected = set(gem.list_envs(args.pattern))
    against_reference([i for i in REFERENCE_IDS if i in selected], args.reference_python, args.seconds, args.repeats)
    if args.hostile:
        hostile(args.hostile_size)


if __name__ == "__main__":
    main()
