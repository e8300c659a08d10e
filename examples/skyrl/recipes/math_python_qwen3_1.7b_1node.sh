#!/usr/bin/env bash
# Qwen3-1.7B-Base, math with the python tool, ReBN with gamma 1.0 (recipe: the .yaml beside this script).
# One node of 8 GPUs, from the root of a GEM clone with skyrl-train 0.3.1 installed
# (examples/skyrl/README.md). MODEL=/path/to/Qwen3-1.7B-Base uses a local copy of the weights;
# further arguments are skyrl-train hydra overrides (they win over the recipe's).
set -euo pipefail
recipe=examples/skyrl/recipes/math_python_qwen3_1.7b_1node.yaml
python examples/skyrl/gem_skyrl.py dry-run --recipe "$recipe"
python examples/skyrl/gem_skyrl.py dataset --recipe "$recipe"
python examples/skyrl/gem_skyrl.py train --recipe "$recipe" trainer.policy.model.path="${MODEL:-Qwen/Qwen3-1.7B-Base}" "$@"
