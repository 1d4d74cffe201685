#!/usr/bin/env bash
# The GPU proof in one call: bash scripts/gpu_check.sh [--rehearse] [--force] RESULTS_DIR
#
# Offline and without installing anything: it runs the engine from this checkout (PYTHONPATH) on the machine's
# own python3 and torch. transformers >= 5.24 must be importable: on the lent GPU machine, install the carried
# wheels first (README, "Your own model / on a GPU"). Steps, each under its own time limit (the limits add up to
# under 8 minutes), each writing RESULTS_DIR/<step>.json (one result record: tevcore/results.py, keys in
# tevcore/lab/gpu_proof/schema.py) and a table:
#   cuda_tests    pytest -m cuda tests/target (tree forward vs recompute per family in bf16, T = 0 identity,
#                 chi-square of tev and residual on the GPU), run by the harness scripts/gpu_cuda_tests.py
#   cost_curve    tree forward of B nodes / one-token forward, random SmolLM2-135M, Qwen3-8B, Llama-3.1-8B geometry
#   verifiers     every exact rule's decision (given the flow, and with it) against the tree forward, Qwen3-8B vocab
#   round_shares  one decode round's stage shares, Qwen3-8B geometry + DFlash-geometry drafter, B = 16, 64, 128
#   identity      T = 0 decoding identical to transformers' generate on the random Qwen3-8B geometry, 32 tokens
#   prediction    PREDICTED speedup of the embedded SmolLM2 pair: this device's costs x E[L] measured on a CPU
# Random weights give every cost and no speedup (a random drafter's drafts are rejected).
# --rehearse: the very same steps on the CPU at tiny geometry. --force: replace the results of an earlier run.
#
# Exit codes: 0 every step passed, or no CUDA device and no --rehearse (one line says so);
#             1 a step failed (the table names it; the output is in RESULTS_DIR/gpu_proof.log);
#             2 bad usage, a results folder that cannot be one, earlier results without --force, or a python
#               without torch (one line says which).
set -uo pipefail
cd "$(dirname "$0")/.."

rehearse=()
force=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) rehearse=(--rehearse); shift ;;
    --force) force=(--force); shift ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ] || [[ "$1" == -* ]]; then
  echo "usage: bash scripts/gpu_check.sh [--rehearse] [--force] RESULTS_DIR" >&2
  exit 2
fi
RESULTS=$1
refuse() { echo "gpu_check: $1" >&2; exit 2; }
if [ -e "$RESULTS" ] && [ ! -d "$RESULTS" ]; then
  refuse "$RESULTS is a file, not a folder: give a results folder"
fi
parent=$RESULTS
while [ ! -e "$parent" ]; do parent=$(dirname "$parent"); done
[ -d "$parent" ] || refuse "$parent is a file, so $RESULTS cannot be a folder"
[ -w "$parent" ] || refuse "$parent is not writable, so the results cannot go in $RESULTS"
if [ ${#force[@]} -eq 0 ] && [ -d "$RESULTS" ] && compgen -G "$RESULTS/*.json" >/dev/null; then
  refuse "$RESULTS holds an earlier run's results: pass --force to replace them, or give another folder"
fi
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  refuse "$PY cannot import torch: run it with the python that has this project's packages (PYTHON=/path/to/python)"
fi
if [ ${#rehearse[@]} -eq 0 ] && ! "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null
then
  echo "gpu_check: no CUDA device here ($PY's torch sees none); nothing to check (--rehearse runs it on the CPU)"
  exit 0
fi
mkdir -p "$RESULTS" || refuse "cannot make the results folder $RESULTS"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L
# RESULTS_DIR gets 8 files (what a device call brings back): the 6 JSON, cuda_tests.log and gpu_proof.log.
# The test lane runs first under its own limit; then one process runs the measuring steps (one start-up), each
# under its own limit (tevcore/lab/gpu_proof/cli.py: STEP_LIMITS, 315 s in all on a GPU); that outer limit only
# catches a hang that no step limit can interrupt.
slack=$([ ${#rehearse[@]} -gt 0 ] && echo 4 || echo 1)
timeout $((120 * slack)) "$PY" scripts/gpu_cuda_tests.py "$RESULTS" "${rehearse[@]}" "${force[@]}" 2>&1 \
  | tee "$RESULTS/gpu_proof.log"
tests_rc=${PIPESTATUS[0]}
[ "$tests_rc" -eq 124 ] && echo "gpu_check: the test lane ran past its limit of $((120 * slack))s"
limit=$([ ${#rehearse[@]} -gt 0 ] && echo 1420 || echo 360)
timeout "$limit" "$PY" -m tevcore.lab.gpu_proof all --out "$RESULTS" "${rehearse[@]}" "${force[@]}" 2>&1 \
  | tee -a "$RESULTS/gpu_proof.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 124 ] && echo "gpu_check: the proof ran past its overall limit of ${limit}s"
echo "gpu_check: results in $RESULTS$([ ${#rehearse[@]} -gt 0 ] && echo ' (CPU REHEARSAL: not GPU figures)')"
if [ "$rc" -ne 0 ] || [ "$tests_rc" -ne 0 ]; then
  echo "gpu_check: FAILED (the output names the step; it is in $RESULTS/gpu_proof.log)"
  exit 1
fi
echo "gpu_check: all steps passed"
