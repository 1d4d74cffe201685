#!/usr/bin/env bash
# Install, then run the whole test suite offline (includes a real-browser test in headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi
export HF_HUB_OFFLINE=1
exec python3 -m pytest -q tests "$@"
