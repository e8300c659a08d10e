#!/usr/bin/env bash
# Qwen3-1.7B-Base on this node's 8 GPUs, one recipe: game_rebn or math_python_tool. Other options pass through to
# train_gem_agent.py (--model /models/Qwen3-1.7B-Base, --env game:Sudoku-v0-random, --dry-run, ...):
#   examples/verl/recipes/launch_1node.sh game_rebn --model /models/Qwen3-1.7B-Base
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
task="${1:?usage: launch_1node.sh game_rebn|math_python_tool [train_gem_agent.py options]}"
shift
exec "${PYTHON:-python}" "$here/../train_gem_agent.py" --recipe "$here/$task.yaml" \
    --recipe "$here/qwen3_1.7b_1node.yaml" --out "runs/verl-$task-1node" "$@"
