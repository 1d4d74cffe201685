#!/usr/bin/env bash
# The GPU proof in one call: bash scripts/gpu_check.sh [--rehearse] RESULTS_DIR
#
# Offline and without installing anything: it runs the engine from this checkout (PYTHONPATH) on the machine's
# own python3 and torch. transformers >= 5.24 must be importable: on the lent GPU machine, install the carried
# wheels first (README, "Your own model / on a GPU"). Steps, each in its own process under its own time limit
# (the limits add up to under 8 minutes), each writing RESULTS_DIR/<step>.json (tevcore/lab/gpu_proof/schema.py):
#   cuda_tests    pytest -m cuda tests/target (tree forward vs recompute per family in bf16, T = 0 identity,
#                 chi-square of tev and residual on the GPU)
#   cost_curve    tree forward of B nodes / one-token forward, random SmolLM2-135M, Qwen3-8B, Llama-3.1-8B geometry
#   verifiers     every exact rule's decision (given the flow, and with it) against the tree forward, Qwen3-8B vocab
#   round_shares  one decode round's stage shares, Qwen3-8B geometry + DFlash-geometry drafter, B = 16, 64, 128
#   identity      T = 0 decoding identical to transformers' generate on the random Qwen3-8B geometry, 32 tokens
#   prediction    PREDICTED speedup of the embedded SmolLM2 pair: this device's costs x E[L] measured on a CPU
# Random weights give every cost and no speedup (a random drafter's drafts are rejected).
# --rehearse: the very same steps on the CPU at tiny geometry (under 3 minutes on a 2-core machine).
#
# Exit codes: 0 every step passed, or no CUDA device and no --rehearse (one line says so);
#             1 a step failed (the table names it; its log is RESULTS_DIR/<step>.log); 2 bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."

rehearse=()
if [ "${1:-}" = "--rehearse" ]; then
  rehearse=(--rehearse)
  shift
fi
if [ $# -ne 1 ] || [[ "$1" == -* ]]; then
  echo "usage: bash scripts/gpu_check.sh [--rehearse] RESULTS_DIR" >&2
  exit 2
fi
RESULTS=$1
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

if [ ${#rehearse[@]} -eq 0 ] && ! "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null
then
  echo "gpu_check: no CUDA device here ($PY's torch sees none); nothing to check (--rehearse runs it on the CPU)"
  exit 0
fi
if ! "$PY" - <<'EOF'
import sys
import torch, transformers
from packaging.version import Version
if Version(transformers.__version__) < Version("5.24"):
    sys.exit(f"gpu_check: transformers {transformers.__version__} is older than 5.24 (tevcore passes `cache=` to the "
             "model); install the carried wheels first (README, 'Your own model / on a GPU')")
print(f"gpu_check: python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}"
      + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", CPU"))
EOF
then
  exit 1
fi

mkdir -p "$RESULTS"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >"$RESULTS/nvidia-smi.txt" 2>&1
results=()
failed=0
step() {  # step NAME SECONDS: run one step of the proof under its limit, log to $RESULTS/NAME.log
  local name=$1 limit=$2 start=$SECONDS rc
  timeout "$limit" "$PY" -m tevcore.lab.gpu_proof "$name" --out "$RESULTS" "${rehearse[@]}" 2>&1 \
    | tee "$RESULTS/$name.log"
  rc=${PIPESTATUS[0]}
  local status=passed
  if [ "$rc" -eq 124 ]; then status="TIMED OUT (limit ${limit}s)"; elif [ "$rc" -ne 0 ]; then status="FAILED (exit $rc)"; fi
  [ "$rc" -eq 0 ] || failed=1
  results+=("$(printf '%-14s %-28s %5d s' "$name" "$status" $((SECONDS - start)))")
}

step cuda_tests 120
step cost_curve 90
step verifiers 60
step round_shares 60
step identity 60
step prediction 45

echo
echo "gpu_check: results in $RESULTS$([ ${#rehearse[@]} -gt 0 ] && echo ' (CPU REHEARSAL: not GPU figures)')"
printf '%s\n' "${results[@]}"
if [ "$failed" -ne 0 ]; then
  echo "gpu_check: FAILED"
  exit 1
fi
echo "gpu_check: all steps passed"
