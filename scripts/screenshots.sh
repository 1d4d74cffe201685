#!/usr/bin/env bash
# Refresh the README's pictures (assets/screenshots/*.png): the browser tests, with screenshots kept there.
# A plain test run writes its screenshots to a temporary folder instead.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 PYTHONPATH="$PWD" TEV_SCREENSHOTS="$PWD/assets/screenshots"
source scripts/install.sh
exec "$PYTHON" -m pytest -q tests/app/test_browser.py "$@"
