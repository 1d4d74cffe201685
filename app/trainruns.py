"""The ExitTrain page's tables over run folders: the runs table and a run's training curves as frames.

Run folders are read by the package (`tevcore.studio.training`), started and stopped by `tevcore.room.training`;
this module only shapes what they say for display and holds no process.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from tevcore.room.limits import Limits
from tevcore.studio import reader
from tevcore.studio.training import METRICS, RunInfo


def runs_table(runs: list[RunInfo]) -> pd.DataFrame:
    rows = []
    for r in runs:
        rows.append({"run": r.folder.name, "state": r.shown_state, "step": f"{r.step}/{r.total}",
                     "resumable": r.resumable, "checkpoints": len(r.checkpoints),
                     "updated": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.updated)) if r.updated else "",
                     "error": r.error or ""})
    return pd.DataFrame(rows, columns=["run", "state", "step", "resumable", "checkpoints", "updated", "error"])


def metrics_frame(folder: Path, limits: Limits) -> pd.DataFrame:
    """metrics.jsonl as a frame (a line being written is skipped), read under the server's byte caps (the studio's
    one reader: a CapExceeded past them)."""
    path = Path(folder) / METRICS
    if not path.is_file():
        return pd.DataFrame()
    from appdata import read_jsonl_frame

    try:
        return read_jsonl_frame(reader.text_of(reader.read_file(limits, path)))
    except OSError:  # removed while being read
        return pd.DataFrame()
