#!/usr/bin/env bash
# Install, then start the Streamlit app on the embedded default target (http://localhost:8501).
#   bash scripts/app.sh            one person on their own machine (generous caps, paths typed freely)
#   bash scripts/app.sh --room     a workshop room: the host's targets and drafters only, a private space per
#                                  participant, one compute queue, caps, training and data builds the host's.
#   bash scripts/app.sh --room --show-secret   the same, and the host secret printed (not for a projected terminal)
# Room settings: TEV_ROOM_CONFIG (a TOML file, default room.toml when it exists; see README "Hosting a workshop
# room"), TEV_ROOM_SECRET (the host's secret; when unset one is made and written to .room-secret, readable by the
# host only, and printed only with --show-secret; a weak one set by the host gets advice), TEV_ROOM_UPLOAD_MB
# (default 5), TEV_ROOM_PORT (default 8501). Other arguments go to `streamlit run`.
set -euo pipefail
cd "$(dirname "$0")/.."
room=0
show_secret=0
args=()
for arg in "$@"; do
  case "$arg" in
    --room) room=1 ;;
    --show-secret) show_secret=1 ;;
    *) args+=("$arg") ;;
  esac
done
source scripts/install.sh
export HF_HUB_OFFLINE=1
if [ "$room" = 1 ]; then
  export TEV_ROOM=1
  export TEV_APP_THREADS="${TEV_APP_THREADS:-1}"   # one core per queued computation: the queue's slots = cores
  if [ -z "${TEV_ROOM_CONFIG:-}" ] && [ -f room.toml ]; then export TEV_ROOM_CONFIG="$PWD/room.toml"; fi
  if [ -z "${TEV_ROOM_SECRET:-}" ]; then
    TEV_ROOM_SECRET="$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(12))')"
    export TEV_ROOM_SECRET
    (umask 077; printf '%s\n' "$TEV_ROOM_SECRET" > .room-secret)
    echo "host secret: written to $PWD/.room-secret (readable by you only; enter it on the ExitTrain page to train)"
  else
    "$PYTHON" -c 'import os; from tevcore.room.secret import strength_advice as a; t = a(os.environ["TEV_ROOM_SECRET"]); print("advice:", t) if t else None'
  fi
  if [ "$show_secret" = 1 ]; then echo "host secret: $TEV_ROOM_SECRET"; fi
  "$PYTHON" -m tevcore.room.settings || exit 2   # bad settings: one line naming them, and no server
  exec "$PYTHON" -m streamlit run app/Home.py --server.headless true --browser.gatherUsageStats false \
    --server.port "${TEV_ROOM_PORT:-8501}" --server.maxUploadSize "${TEV_ROOM_UPLOAD_MB:-5}" \
    --server.fileWatcherType none --client.toolbarMode viewer ${args[@]+"${args[@]}"}
fi
"$PYTHON" -m tevcore.room.settings || exit 2
exec "$PYTHON" -m streamlit run app/Home.py --server.headless true --browser.gatherUsageStats false ${args[@]+"${args[@]}"}
