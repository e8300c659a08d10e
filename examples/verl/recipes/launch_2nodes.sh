#!/usr/bin/env bash
# Qwen3-4B-Base on two nodes of 8 GPUs each, one recipe: game_rebn or math_python_tool.
#   on the second node first:  examples/verl/recipes/launch_2nodes.sh worker <head node's address>
#   then on the head node:     examples/verl/recipes/launch_2nodes.sh head game_rebn --model /models/Qwen3-4B-Base \
#                                  --out /shared/runs/verl-game_rebn-2nodes
# The head starts Ray's head, waits until both nodes' 16 GPUs have joined, then runs train_gem_agent.py (verl's
# main_ppo joins that cluster). --out must be on a filesystem both nodes see. With --dry-run the head starts no
# Ray: it builds and checks verl's config for 2 x 8 GPUs and prints the command (a CPU is enough).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python}"
port="${RAY_PORT:-6379}"
usage="usage: launch_2nodes.sh head game_rebn|math_python_tool [train_gem_agent.py options] | worker HEAD_ADDRESS"
role="${1:?$usage}"
shift
case "$role" in
  worker)
    head="${1:?$usage}"
    exec ray start --address "$head:$port" --num-gpus 8 --block
    ;;
  head)
    task="${1:?$usage}"
    shift
    if [[ " $* " != *" --dry-run "* ]]; then
      ray start --head --port "$port" --num-gpus 8
      export RAY_ADDRESS="127.0.0.1:$port"
      until "$python" -c "import ray, sys; ray.init(); sys.exit(ray.cluster_resources().get('GPU', 0) < 16)" \
          2>/dev/null; do
        echo "waiting for the second node's 8 GPUs to join the Ray cluster at $(hostname):$port ..."
        sleep 10
      done
    fi
    exec "$python" "$here/../train_gem_agent.py" --recipe "$here/$task.yaml" \
        --recipe "$here/qwen3_4b_2nodes.yaml" --out "runs/verl-$task-2nodes" "$@"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
