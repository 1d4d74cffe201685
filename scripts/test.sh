#!/usr/bin/env bash
# Install, then run the whole test suite offline (includes real-browser tests in headless Chromium).
# Extra arguments go to pytest: `bash scripts/test.sh -m "not slow"` is the quick lane.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null \
    || echo "test.sh: could not install Chromium; the browser tests will skip" >&2
fi
export HF_HUB_OFFLINE=1
exec "$PYTHON" -m pytest -q --durations=25 tests "$@"
