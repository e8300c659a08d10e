#!/usr/bin/env bash
# Qwen3-4B-Base, math with the python tool, ReBN with gamma 1.0 (recipe: the .yaml beside this script).
# Two nodes of 8 GPUs. First start one Ray cluster over them, from the root of a GEM clone at
# the same path on both, with skyrl-train 0.3.1 installed (examples/skyrl/README.md):
#   head node:   ray start --head --port=6379
#   other node:  ray start --address=<head-ip>:6379
# then run this script on the head node (skyrl-train's ray.init joins that cluster).
# MODEL=/path/to/Qwen3-4B-Base uses a local copy of the weights (on both nodes); further
# arguments are skyrl-train hydra overrides (they win over the recipe's).
set -euo pipefail
recipe=examples/skyrl/recipes/math_python_qwen3_4b_2nodes.yaml
python examples/skyrl/gem_skyrl.py dry-run --recipe "$recipe"
python examples/skyrl/gem_skyrl.py dataset --recipe "$recipe"
python examples/skyrl/gem_skyrl.py train --recipe "$recipe" trainer.policy.model.path="${MODEL:-Qwen/Qwen3-4B-Base}" "$@"
