"""The ExitTrain page's helpers over the package's run readers (`tevcore.train.runs`): the runs table, the
training curves, and what the Compare tab offers. Starting, stopping and owning runs is the package's
`tevcore.room.training`; this module holds no process.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pandas as pd

from tevcore.proposers.block import default_drafter_path
from tevcore.room.limits import Limits
from tevcore.studio import reader
from tevcore.train import rundir
from tevcore.train.runs import RunInfo

DEFAULT_DRAFTER = default_drafter_path()  # the committed default drafter


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
    path = Path(folder) / rundir.METRICS
    if not path.is_file():
        return pd.DataFrame()
    from appdata import read_jsonl_frame

    try:
        return read_jsonl_frame(reader.text_of(reader.read_file(limits, path)))
    except OSError:  # removed while being read
        return pd.DataFrame()


def weights_digest(folder: Path) -> str | None:
    """SHA-256 of a drafter folder's weight files (None when it has none), to tell identical drafters apart."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def identical_weights(folders: list[str]) -> list[tuple[str, str]]:
    """Pairs of the chosen drafter folders whose weight files are byte-for-byte the same."""
    seen: dict[str, str] = {}
    pairs = []
    for folder in folders:
        key = weights_digest(Path(folder))
        if key is None:
            continue
        if key in seen:
            pairs.append((seen[key], folder))
        else:
            seen[key] = folder
    return pairs


def default_comparison(runs: list[RunInfo]) -> list[str]:
    """Compare's starting pair: the newest checkpoint of the newest run with one, against the committed drafter."""
    newest = next((r.checkpoints[-1] for r in runs if r.checkpoints), None)
    pair = [str(newest)] if newest is not None else []
    if DEFAULT_DRAFTER.is_dir():
        pair.append(str(DEFAULT_DRAFTER))
    return pair


def checkpoints_signature(runs: list[RunInfo]) -> tuple:
    """What the Compare tab offers from `runs`: every checkpoint and each run's state. When it changes (a run
    wrote a checkpoint or ended), the tab must be redrawn to offer the new drafter."""
    return tuple((str(r.folder), r.state, tuple(str(p) for p in r.checkpoints)) for r in runs)
