#!/usr/bin/env bash
# Issue 44, a probe beside the ablation: the tree term made to matter (lambda 10, about 6% of the loss where
# lambda 0.1 gives 0.07%), soft anchor and otherwise the ablation's recipe on its first 10 greedy shards; scored in
# one pass paired with the start and with the ablation's soft-0 at step 600. Needs runs/exit-ablation (the ablation).
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python}
$PY -m tevcore train runs/exit-ablation-extra/soft-10 --init assets/drafter --data runs/exit-ablation/data-greedy \
  --steps 600 --batch-size 32 --tree-share 0.25 --tree-pool 64 --tree-budget 32 --tree-norm node --anchor-loss soft \
  --tree-lambda 10 --tree-weight path --lr 1e-4 --warmup 20 --seed 0 --checkpoint-every 600 --max-shards 10 \
  --target default --device auto --threads "${THREADS:-$(nproc)}"
$PY -m tevcore eval-drafter assets/drafter --compare runs/exit-ablation/soft-0/checkpoint-600 \
  runs/exit-ablation-extra/soft-10/drafter --pairs 0:1,0:2,1:2 --budgets 8,16,32,64 --temperatures 0,1 \
  --greedy-sets mt-bench,humaneval,gsm8k --sample-sets mt-bench,humaneval,gsm8k --per-set 8 --max-new-tokens 48 \
  --json runs/exit-ablation-extra/pass-soft-10.json --target default --device auto --threads "${THREADS:-$(nproc)}"
