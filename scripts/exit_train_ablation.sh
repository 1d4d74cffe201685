#!/usr/bin/env bash
# What ExitTrain's gain is made of (issue 44): four arms fine-tuned from one starting drafter on the target's
# greedy-regenerated responses (build-data --greedy), anchor loss soft (top-k distillation) or hard (one-hot CE
# on the greedy token) x tree term lambda 0 or 0.1, at tree budget 32 with per-node normalisation. Every arm
# draws the same batches (the tree share makes every arm draw from the tree pool; lambda-0 arms build no trees).
# Each arm keeps POINTS checkpoints; every checkpoint is scored paired against the starting drafter and, for
# lambda 0.1, against its lambda-0 twin at the same step, all in ONE `eval-drafter --compare` pass (one decode,
# the same round starts and one target forward per position for every drafter), at BUDGETS and TEMPS on PER_SET
# held-out prompts of each of SETS, with standard errors clustered by prompt. $OUT/ablation.json gathers it all;
# the table goes to stdout.
# From a start that never saw the target's outputs (issue 55, START=naive): scripts/naive_start.sh trains it
# into $OUT/naive-start (text pairs only; its how_made.json says so), the arms start from it, and REFERENCE (the
# committed drafter) is scored against it in the same pass. T1_ARMS train the same way on a third data set, the
# target's T = 1 responses (DATA_T1), named t1-<anchor>-<lambda>, each lambda > 0 paired with its lambda-0 twin.
# Every arm logs the gradient probe (`train --probe-every`) at its checkpoints: the cosine between the tree term's
# and the anchor term's gradients and the batch's tree E, lambda-0 twins included; the report gives their twin
# differences per checkpoint.
#
#   bash scripts/exit_train_ablation.sh [out folder]           # the ablation (resumes: finished arms and a
#                                                              # finished pass are kept, a cut-short arm resumes)
#   START=naive bash scripts/exit_train_ablation.sh [out]      # the same from a naive start (built first)
#   COST=20 bash scripts/exit_train_ablation.sh [out folder]   # only a step's cost: COST steps of each arm
# Settings (environment, defaults in brackets): TARGET [default], START [committed, or naive], INIT
# [assets/drafter; with START=naive the naive start], REFERENCE [with START=naive: assets/drafter; otherwise
# none], DATA [$OUT/data-greedy, built or resumed here], DATA_T1 [$OUT/data-t1, built or resumed here when
# T1_ARMS name any], T1_ARMS [with START=naive: soft:0 soft:0.1; otherwise none], SHARDS [16], MAX_NEW_DATA
# [192], STEPS [600], POINTS [4], PROBE_EVERY [the checkpoint interval; 0 for none], BATCH [32], SHARE [0.25: the
# share of each batch's anchors that get a tree; the public recipe is 1], POOL [64 sequences], BUDGET [32],
# LAMBDA [0.1], LR [1e-4], WARMUP [20], SEED [0], EVAL_STEPS [every kept checkpoint; e.g. 20,40 evaluates
# only those, in a pass of their own], BUDGETS [8,16,32,64], TEMPS [0,1],
# SETS [mt-bench,humaneval,gsm8k], PER_SET [10], MAX_NEW [64], THREADS [the cores], DEVICE [auto], PYTHON [python];
# with START=naive also the settings of scripts/naive_start.sh (SHAPE_OF, TEXT_SHARDS, NAIVE_STEPS...).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/exit-ablation}
PY=${PYTHON:-python}
case ${START:-committed} in
    committed) INIT=${INIT:-assets/drafter} REFERENCE=${REFERENCE:-} T1_ARMS=${T1_ARMS:-} ;;
    naive)
        bash scripts/naive_start.sh "$OUT/naive-start"  # resumes; fails unless the start saw no generated response
        INIT=${INIT:-$OUT/naive-start/run/drafter} REFERENCE=${REFERENCE-assets/drafter}
        T1_ARMS=${T1_ARMS-soft:0 soft:0.1} ;;
    *) echo "START must be committed or naive, not ${START}" >&2; exit 2 ;;
esac
DATA=${DATA:-$OUT/data-greedy}
DATA_T1=${DATA_T1:-$OUT/data-t1}
STEPS=${STEPS:-600}
POINTS=${POINTS:-4}
SETS=${SETS:-mt-bench,humaneval,gsm8k}
common=(--target "${TARGET:-default}" --device "${DEVICE:-auto}" --threads "${THREADS:-$(nproc)}")
mkdir -p "$OUT"

if [ ! -f "$DATA/manifest.json" ] || [ "$DATA" = "$OUT/data-greedy" ]; then
    $PY -m tevcore build-data "$DATA" --greedy --max-shards "${SHARDS:-16}" --max-new-tokens "${MAX_NEW_DATA:-192}" \
        "${common[@]}"  # resumes a cut-short build; finished shards are kept
fi
if [ -n "$T1_ARMS" ] && { [ ! -f "$DATA_T1/manifest.json" ] || [ "$DATA_T1" = "$OUT/data-t1" ]; }; then
    # the target's T = 1 responses to the same training prompts, nothing teacher-forced
    $PY -m tevcore build-data "$DATA_T1" --generate true --samples 1 --temperatures 1 --text-pairs false \
        --python-files 0 --max-shards "${SHARDS:-16}" --max-new-tokens "${MAX_NEW_DATA:-192}" "${common[@]}"
fi

every=$(( STEPS / POINTS ))
train_arm() {  # train_arm FOLDER ARM STEPS [extra flags]; ARM is [t1-]ANCHOR:LAMBDA (t1-: on the T = 1 responses)
    local folder=$1 name=${2%%:*} lambda=${2##*:} steps=$3 data=$DATA
    shift 3
    if [ "$name" != "${name#t1-}" ]; then data=$DATA_T1; fi
    # every arm reads the first SHARDS shards, whatever a later build adds; it probes at its checkpoints
    $PY -m tevcore train "$folder" --init "$INIT" --data "$data" --steps "$steps" --batch-size "${BATCH:-32}" \
        --tree-share "${SHARE:-0.25}" --tree-pool "${POOL:-64}" --tree-budget "${BUDGET:-32}" --tree-norm node \
        --anchor-loss "${name#t1-}" --tree-lambda "$lambda" --tree-weight path --lr "${LR:-1e-4}" \
        --warmup "$(( ${WARMUP:-20} < steps ? ${WARMUP:-20} : steps ))" --seed "${SEED:-0}" \
        --max-shards "${SHARDS:-16}" --probe-every "${PROBE_EVERY:-$(( every < steps ? every : steps ))}" \
        "$@" "${common[@]}"
}

ARMS=(soft:0 soft:${LAMBDA:-0.1} hard:0 hard:${LAMBDA:-0.1})
for arm in $T1_ARMS; do ARMS+=("t1-$arm"); done

if [ -n "${COST:-}" ]; then  # a step's cost per arm, from the run's own clock (loading excluded)
    for arm in "${ARMS[@]}"; do
        folder=$OUT/cost-${arm/:/-}
        rm -rf "$folder"
        train_arm "$folder" "$arm" "$COST" --checkpoint-every "$COST" > "$folder.log" 2>&1
        $PY - "$folder" "$arm" <<'EOF'
import json, sys
status = json.load(open(f"{sys.argv[1]}/status.json"))
steps = status["step"] - status["start_step"]
print(f"arm {sys.argv[2]:<10} {steps} steps  {(status['updated'] - status['steps_began']) / steps:.2f} s/step")
EOF
    done
    exit 0
fi

for arm in "${ARMS[@]}"; do
    [ -f "$OUT/${arm/:/-}/drafter/config.json" ] && continue  # finished
    train_arm "$OUT/${arm/:/-}" "$arm" "$STEPS" --checkpoint-every "$every" --keep-checkpoints true
done

mkdir -p "$OUT/eval"
# One pass scores the start and every evaluated checkpoint of every arm at the same round starts (one decode,
# one target forward per position for them all): drafter 0 is the start, each checkpoint is paired against it
# and, for lambda > 0, against its lambda-0 twin at the same step; REFERENCE, when named, is scored against the start.
eval_steps=${EVAL_STEPS:-$(seq -s, "$every" "$every" "$STEPS")}
drafters=("$INIT") pairs=()
if [ -n "$REFERENCE" ]; then
    drafters+=("$REFERENCE") pairs+=("0:1")
fi
declare -A number
for step in ${eval_steps//,/ }; do
    for arm in "${ARMS[@]}"; do
        name=${arm/:/-}
        number[$name-$step]=${#drafters[@]}
        drafters+=("$OUT/$name/checkpoint-$step")
        pairs+=("0:${number[$name-$step]}")
        if [ "${arm##*:}" != 0 ]; then
            pairs+=("${number[${arm%%:*}-0-$step]}:${number[$name-$step]}")
        fi
    done
done
json=$OUT/eval/pass-${eval_steps//,/-}.json
if [ ! -f "$json" ]; then
    $PY -m tevcore eval-drafter "$INIT" --compare "${drafters[@]:1}" --pairs "$(IFS=,; echo "${pairs[*]}")" \
        --budgets "${BUDGETS:-8,16,32,64}" --temperatures "${TEMPS:-0,1}" --greedy-sets "$SETS" --sample-sets "$SETS" \
        --per-set "${PER_SET:-10}" --max-new-tokens "${MAX_NEW:-64}" --json "$json" "${common[@]}"
fi
$PY scripts/exit_train_ablation_report.py "$OUT"
