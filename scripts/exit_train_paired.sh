#!/usr/bin/env bash
# ExitTrain where the paper measured it: plain distillation against ExitTrain (lambda 0.1, path and flow
# weights), every variant fine-tuned from one starting drafter on the same batches (`compare`), then each
# ExitTrain variant scored against distillation at the same round starts (`eval-drafter --compare`) at
# budgets 8, 16, 32 and 64, at T = 1 and T = 0, on PER_SET x 3 held-out prompts (30 by default).
# The paired gain per budget and its standard error are in $OUT/paired-<variant>.json and on stdout.
#
#   bash scripts/exit_train_paired.sh [out folder]
# Settings (environment): TARGET (default: the embedded target), INIT (starting drafter; default assets/drafter,
# empty: a fresh one), DATA (a distillation set; default: $OUT/data, built or resumed here), SHARDS (8), STEPS (300), PER_SET (10),
# MAX_NEW (64), THREADS (4), DEVICE (auto), PYTHON (python).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/exit-paired}
TARGET=${TARGET:-default}
INIT=${INIT-assets/drafter}
DATA=${DATA:-}
PY=${PYTHON:-python}
common=(--target "$TARGET" --device "${DEVICE:-auto}" --threads "${THREADS:-4}")
start=()
[ -n "$INIT" ] && start=(--init "$INIT")

if [ -z "$DATA" ]; then
    DATA=$OUT/data
    $PY -m tevcore build-data "$DATA" --max-shards "${SHARDS:-8}" "${common[@]}"  # resumes a cut-short build
fi
$PY -m tevcore compare "$OUT" --data "$DATA" "${start[@]}" --variants distill,exit-P-0.1,exit-F-0.1 \
    --steps "${STEPS:-300}" --batch-size 32 --tree-anchors 8 --budgets 8 --per-set 1 --max-new-tokens 16 "${common[@]}"
for variant in exit-P-0.1 exit-F-0.1; do
    $PY -m tevcore eval-drafter "$OUT/distill/drafter" --compare "$OUT/$variant/drafter" --budgets 8,16,32,64 \
        --temperatures 1,0 --sample-sets humaneval,mt-bench,gsm8k --greedy-sets humaneval,mt-bench,gsm8k \
        --per-set "${PER_SET:-10}" --max-new-tokens "${MAX_NEW:-64}" --json "$OUT/paired-$variant.json" "${common[@]}"
done
