#!/usr/bin/env bash
# A start that never saw the target's outputs (issue 55): a block drafter of SHAPE_OF's architecture (its depth,
# context, encoder layers, heads, MLP width, dropout, draft vocabulary and feature layers; by default the
# committed drafter's), trained from random weights on teacher-forced text only: `build-data --generate false`
# stores the prompt sets' reference answers and Python source run through the target, and no response the target
# generated. The run's drafter/how_made.json records the kinds of data it trained on; the script fails unless it
# says the drafter saw no generated response.
#
#   bash scripts/naive_start.sh [out folder]          # the start: $OUT/run/drafter (resumes: a finished build
#                                                     # and a finished run are kept, a cut-short one resumes)
#   COST=20 bash scripts/naive_start.sh [out folder]  # only a step's cost: COST steps into $OUT/cost
# Settings (environment, defaults in brackets): TARGET [default], SHAPE_OF [assets/drafter], DATA_TEXT
# [$OUT/data-text, built or resumed here], TEXT_SHARDS [all the plan's], NAIVE_STEPS [4000], NAIVE_BATCH [64],
# NAIVE_LR [1e-3], NAIVE_WARMUP [50], NAIVE_WEIGHT_DECAY [0.05], NAIVE_SEED [0], NAIVE_CHECKPOINT_EVERY [500],
# THREADS [the cores], DEVICE [auto], PYTHON [python]. (The committed drafter's first stage: lr 1e-3, warmup 40,
# dropout 0.1, weight decay 0.05, batch 64; assets/drafter/how_made.json.)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/naive-start}
PY=${PYTHON:-python}
DATA_TEXT=${DATA_TEXT:-$OUT/data-text}
common=(--target "${TARGET:-default}" --device "${DEVICE:-auto}" --threads "${THREADS:-$(nproc)}")
mkdir -p "$OUT"

# SHAPE_OF's training-config shape (its kind's own `shape`, spelled by the train CLI) and the data it reads
mapfile -t shape < <($PY - "${SHAPE_OF:-assets/drafter}" <<'EOF'
import sys
from tevcore.proposers.block import read_config
from tevcore.proposers.block_training import drafter_folder
from tevcore.proposers.registry import trainer_for
from tevcore.train.train_cli import command_line

_, trainer, source = trainer_for(sys.argv[1])
fixed = trainer.shape(source)
print(" ".join(command_line("-", fixed)[1:]))
print(f"--hidden-layers {','.join(map(str, read_config(drafter_folder(source)).hidden_layers))} "
      f"--context {fixed['context']}")
EOF
)
read -r -a train_shape <<< "${shape[0]}"
read -r -a data_shape <<< "${shape[1]}"

if [ ! -f "$DATA_TEXT/manifest.json" ] || [ "$DATA_TEXT" = "$OUT/data-text" ]; then
    $PY -m tevcore build-data "$DATA_TEXT" --generate false "${data_shape[@]}" \
        ${TEXT_SHARDS:+--max-shards "$TEXT_SHARDS"} "${common[@]}"  # resumes a cut-short build
fi

train_naive() {  # train_naive FOLDER STEPS [extra flags]
    local folder=$1 steps=$2
    shift 2
    $PY -m tevcore train "$folder" --data "$DATA_TEXT" "${train_shape[@]}" --steps "$steps" \
        --batch-size "${NAIVE_BATCH:-64}" --lr "${NAIVE_LR:-1e-3}" \
        --warmup "$(( ${NAIVE_WARMUP:-50} < steps ? ${NAIVE_WARMUP:-50} : steps ))" \
        --weight-decay "${NAIVE_WEIGHT_DECAY:-0.05}" --seed "${NAIVE_SEED:-0}" \
        ${TEXT_SHARDS:+--max-shards "$TEXT_SHARDS"} "$@" "${common[@]}"
}

if [ -n "${COST:-}" ]; then  # a step's cost, from the run's own clock (loading excluded)
    rm -rf "$OUT/cost"
    train_naive "$OUT/cost" "$COST" --checkpoint-every "$COST" > "$OUT/cost.log" 2>&1
    $PY - "$OUT/cost" <<'EOF'
import json, sys
status = json.load(open(f"{sys.argv[1]}/status.json"))
steps = status["step"] - status["start_step"]
print(f"naive start: {steps} steps  {(status['updated'] - status['steps_began']) / steps:.2f} s/step")
EOF
    exit 0
fi

if [ ! -f "$OUT/run/drafter/config.json" ]; then
    train_naive "$OUT/run" "${NAIVE_STEPS:-4000}" --checkpoint-every "${NAIVE_CHECKPOINT_EVERY:-500}"
fi
$PY - "$OUT/run/drafter" <<'EOF'
import json, sys
record = json.load(open(f"{sys.argv[1]}/how_made.json"))
if record["saw_generated_responses"] is not False:
    sys.exit(f"{sys.argv[1]} is no naive start: its how_made.json says saw_generated_responses = "
             f"{record['saw_generated_responses']} (kinds {record['kinds_seen']})")
print(f"naive start: {sys.argv[1]} (trained on {', '.join(record['kinds_seen'])} only; no generated response)")
EOF
