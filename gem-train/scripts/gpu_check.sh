#!/usr/bin/env bash
# The paper path's GPU figures on a machine with no network (issue 35, point 8), in one command that fits a
# 10-minute slot and returns figures even when a stage runs out of time.
#
#   nox -s gpu_bundle                        # here, with network: wheels into runs/gpu_bundle
#   bash gem-train/scripts/gpu_check.sh      # there, from the repository root, with runs/gpu_bundle beside it
#
# It installs the bundle's wheels without dependencies into a scratch folder (the machine's own torch and
# transformers stay), then runs gem_train.gpu_smoke twice, each under a time limit:
#   stage 1: short turns (TOK1 tokens), 3 iterations: setup, learner and sampler figures in little time;
#   stage 2: the paper's long turns (TOK2 tokens), 2 iterations of TURNS2 turns, on the model stage 1 built.
# Everything lands in OUT: versions.txt, stageN.log (the trainer's [setup], [rollout] and [train] lines),
# stageN.metrics.jsonl (what iterations finished, also after a timeout), stageN.json (gpu_smoke's summary) and
# memory.csv (device memory each second, by nvidia-smi). Settings are environment variables:
#   OUT=runs/gpu_check BUNDLE=runs/gpu_bundle PY=python3 SIZE=1.7B DEVICE=cuda ENGINE=hf_async
#   T1=300 TOK1=256 T2=220 TOK2=1024 TURNS2=64 EXTRA=
# EXTRA holds more Hydra overrides for both stages, separated by spaces (EXTRA="trainer.lr=2e-6"); the stages' own
# settings above (TOK1, TOK2, TURNS2) win over it.
# ENGINE=hf_async samples with transformers (no vLLM there) with continuous batching and carry-over, the paper
# path's rollouts; ENGINE=hf with the batch engine; where vLLM is installed, ENGINE=vllm_async.
# A rehearsal on CPU: SIZE=tiny DEVICE=cpu TOK1=24 TOK2=48 TURNS2=8 bash gem-train/scripts/gpu_check.sh
# and at Qwen3-1.7B's width (hidden 2048, 16 heads, the 151,936-row embedding) with two of its 28 layers, in about
# 10 GiB: SIZE=1.7B DEVICE=cpu TOK1=16 TOK2=64 TURNS2=8 \
#     EXTRA="model.tiny.num_layers=2 rollout.episodes_per_iter=2 rollout.turns_per_iter=4 rollout.concurrency=4" \
#     bash gem-train/scripts/gpu_check.sh
set -uo pipefail
OUT=${OUT:-runs/gpu_check}
BUNDLE=${BUNDLE:-runs/gpu_bundle}
PY=${PY:-python3}
SIZE=${SIZE:-1.7B}
DEVICE=${DEVICE:-cuda}
ENGINE=${ENGINE:-hf_async}
T1=${T1:-300}
TOK1=${TOK1:-256}
T2=${T2:-220}
TOK2=${TOK2:-1024}
TURNS2=${TURNS2:-64}
read -r -a EXTRA <<< "${EXTRA:-}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G "$BUNDLE/*.whl" >/dev/null; then
    site=$(mktemp -d)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$BUNDLE"/*.whl || exit 1
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
{
    "$PY" - <<'PY'
import importlib.metadata as m, platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
for name in ("transformers", "tokenizers", "vllm", "gem-core", "gem-train", "hydra-core"):
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "not installed")
PY
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"
poller=
if command -v nvidia-smi >/dev/null && [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -l 1 > "$OUT/memory.csv" &
    poller=$!
fi
stage() {  # stage N SECONDS ARGS...: one gpu_smoke run under a time limit; its files copied to OUT whatever happens
    local n=$1 seconds=$2 run=runs/gpu_check_stage$1
    shift 2
    echo "== stage $n: gpu_smoke size=$SIZE device=$DEVICE engine=$ENGINE ${EXTRA[*]} $* (limit ${seconds} s)"
    timeout --signal=INT --kill-after=15 "$seconds" "$PY" -m gem_train.gpu_smoke size="$SIZE" device="$DEVICE" \
        engine="$ENGINE" out="$run" "${EXTRA[@]}" "$@" 2>&1 | tee "$OUT/stage$n.log"
    local rc=${PIPESTATUS[0]}
    echo "== stage $n: exit $rc$([ "$rc" = 124 ] && echo ' (the time limit)')"
    cp "$run/metrics.jsonl" "$OUT/stage$n.metrics.jsonl" 2>/dev/null
    cp "$run/gpu_smoke.json" "$OUT/stage$n.json" 2>/dev/null
    return 0
}
# stage 2 trains the model stage 1 built (the same random weights and tokenizer: the build's recipe does not depend
# on the turn length), so its time goes to long turns, not to building and writing 7 GB again; where stage 1 stopped
# before its build was complete (the marker is written last), stage 2 builds its own. An earlier check's model is
# removed first, so a stage 1 stopped before it starts over cannot hand stage 2 a model of another SIZE.
built=runs/gpu_check_stage1/model_init
rm -rf "$built"
stage 1 "$T1" iterations=3 rollout.max_tokens="$TOK1"
shared=()
[ -s "$built/gem_train_build.json" ] && shared=(model.name=hf "model.path=$built")
stage 2 "$T2" iterations=2 rollout.max_tokens="$TOK2" rollout.turns_per_iter="$TURNS2" ${shared[@]+"${shared[@]}"}
[ -n "$poller" ] && kill "$poller" 2>/dev/null
[ -s "$OUT/memory.csv" ] && echo "peak device memory by nvidia-smi: $(cut -d, -f2 "$OUT/memory.csv" | sort -n | tail -1)"
exit 0
