#!/usr/bin/env bash
# Install, then start the Streamlit app on the embedded default target (http://localhost:8501).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
export HF_HUB_OFFLINE=1
exec "$PYTHON" -m streamlit run app/Home.py --server.headless true --browser.gatherUsageStats false "$@"
