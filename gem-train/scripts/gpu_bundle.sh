#!/usr/bin/env bash
# The wheels gpu_check.sh installs on a GPU machine with no network, whose image has torch and transformers (they
# stay) and maybe nothing else of ours: gem-core, gem-envs-games and gem-train from this tree, and what the check
# imports of their dependencies that such an image may lack (gem-core's pluggy; Hydra's hydra-core, omegaconf and
# antlr4), at the main job's pins. Pure-Python wheels, about 1 MB together: any Python 3.10+ takes them. The check
# runs without tensorboard and matplotlib (a line says each is missing).
#
#   bash gem-train/scripts/gpu_bundle.sh [FOLDER]      # here, with a registry; FOLDER defaults to runs/gpu_bundle
#
# nox -s gpu_bundle runs it; tests/test_gpu_smoke.py runs the check from its bundle with every other package of
# ours hidden. Settings: PY=python3 (the interpreter whose pip builds the wheels).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/runs/gpu_bundle}
PY=${PY:-python3}
rm -rf "$out"
"$PY" -m pip wheel -q --no-deps -w "$out" -c "$root/gem-train/constraints-main.txt" \
    "$root/gem-core" "$root/gem-envs-games" "$root/gem-train" pluggy hydra-core omegaconf antlr4-python3-runtime
echo "$out: $(cd "$out" && ls -- *.whl | tr '\n' ' ')"
