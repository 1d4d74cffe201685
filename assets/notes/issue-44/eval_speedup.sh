#!/usr/bin/env bash
# The ablation's evaluation cost before and after the one-pass `eval-drafter --compare` (issue 44), on the same
# checkpoints, prompts and settings. Before: the old script's evaluation, one `eval-drafter A --compare B` command
# per pair (each checkpoint against the start; each lambda-0.1 checkpoint against its lambda-0 twin), run by the
# code of BEFORE (default 0525a0a, the commit before the change: one target forward per drafter's tree). After:
# this tree's one pass over all those drafters and pairs (one union-tree forward per position for them all), run
# first and last (A B A) so a change of the machine's load shows. Prints a line per command and the totals.
#
#   bash assets/notes/issue-44/eval_speedup.sh runs/abl-speed     # an ablation folder with its arms trained
# Settings as in scripts/exit_train_ablation.sh: INIT, EVAL_STEPS, BUDGETS, TEMPS, SETS, PER_SET, MAX_NEW, THREADS,
# and BEFORE (a commit).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=$1
PY=${PYTHON:-python}
INIT=${INIT:-assets/drafter}
SETS=${SETS:-mt-bench,humaneval,gsm8k}
BEFORE=${BEFORE:-0525a0a}
ARMS=(soft-0 soft-0.1 hard-0 hard-0.1)
eval_flags=(--budgets "${BUDGETS:-8,16,32,64}" --temperatures "${TEMPS:-1}" --greedy-sets "$SETS" --sample-sets "$SETS"
            --per-set "${PER_SET:-1}" --max-new-tokens "${MAX_NEW:-4}" --target default --device cpu
            --threads "${THREADS:-1}" --force)
old=$(mktemp -d)
git archive "$BEFORE" | tar -x -C "$old"
export TEVCORE_DATASETS=${TEVCORE_DATASETS:-$(cd .. && pwd)/shared/datasets}  # the old copy reads the same sets
mkdir -p "$OUT/speed"

timed() {  # timed LABEL JSON CODE-ROOT ARGS...: wall seconds of one eval-drafter command, and its in-run seconds
    local label=$1 json=$2 root=$3 began
    shift 3
    began=$(date +%s.%N)
    (cd "$root" && PYTHONPATH=$root HF_HUB_OFFLINE=1 $PY -m tevcore eval-drafter "$@" "${eval_flags[@]}" \
        --json "$json" > "$json.log" 2>&1)
    $PY - "$label" "$began" "$(date +%s.%N)" "$json" <<'PY'
import json, sys
label, began, ended, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
record = json.load(open(path))
print(f"{label:<34} wall {float(ended) - float(began):7.1f} s  decode {record['summary']['seconds']:7.1f} s  "
      f"pairs {len({(r['baseline'], r['other']) for r in record['rows']})}", flush=True)
PY
}

drafters=() pairs=() before=()
EVAL_STEPS=${EVAL_STEPS:-4,8}
for step in ${EVAL_STEPS//,/ }; do
    for arm in "${ARMS[@]}"; do
        drafters+=("$PWD/$OUT/$arm/checkpoint-$step")
        pairs+=("0:${#drafters[@]}")
        before+=("$PWD/$INIT $PWD/$OUT/$arm/checkpoint-$step")
        if [ "${arm#*-}" != 0 ]; then
            pairs+=("$(( ${#drafters[@]} - 1 )):${#drafters[@]}")  # its twin came just before it
            before+=("$PWD/$OUT/${arm%-*}-0/checkpoint-$step $PWD/$OUT/$arm/checkpoint-$step")
        fi
    done
done
pass=("$PWD/$INIT" --compare "${drafters[@]}" --pairs "$(IFS=,; echo "${pairs[*]}")")
uptime
timed "after: one pass, ${#pairs[@]} pairs" "$PWD/$OUT/speed/after-1.json" "$PWD" "${pass[@]}"
uptime
k=0
for pair in "${before[@]}"; do
    k=$((k + 1))
    read -r a b <<< "$pair"
    timed "before: pair $k of ${#before[@]}" "$PWD/$OUT/speed/before-$k.json" "$old" "$a" --compare "$b"
done
uptime
timed "after: one pass, ${#pairs[@]} pairs" "$PWD/$OUT/speed/after-2.json" "$PWD" "${pass[@]}"
uptime
rm -rf "$old"
