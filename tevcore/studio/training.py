"""The ExitTrain page's door to run folders and training recipes: what a run folder says of itself, the data sets
a run can learn from, the recipe the form opens at, and which drafters the Compare tab offers.

The readers stay the package's (`tevcore.train.runs` reads what `python -m tevcore train` writes, `recipes` holds
the numbers, `proposers.block` names the committed drafter); this module is the page's one way to them, plus the
few questions only the page asks (are two picked drafters the same weights, which pair does Compare start from,
did a run write a new checkpoint). Starting, stopping and owning runs is `tevcore.room.training`'s.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tevcore.proposers.block import default_drafter_path
from tevcore.train.ablation_finding import ablation_finding
from tevcore.train.losses import TREE_WEIGHTS
from tevcore.train.recipes import recipe
from tevcore.train.rundir import METRICS, RunState
from tevcore.train.runs import DATA_LOG, LOG_NAME, RunInfo, data_progress, data_sets, list_runs, log_tail

__all__ = ["ablation_finding", "committed_ablations", "DATA_LOG", "DEFAULT_DRAFTER", "LOG_NAME", "METRICS", "RunInfo", "RunState", "TREE_WEIGHTS",
           "checkpoints_signature", "data_progress", "data_sets", "default_comparison", "identical_weights",
           "list_runs", "log_tail", "missing", "recipe", "weights_digest"]

DEFAULT_DRAFTER = default_drafter_path()  # the committed default drafter


def committed_ablations() -> list[Path]:
    """The ExitTrain ablations committed with the project (assets/exit_ablation*.json), the first one first."""
    return sorted(DEFAULT_DRAFTER.parent.glob("exit_ablation*.json"), key=lambda p: (len(p.name), p.name))


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


def missing(picks: list[str]) -> list[str]:
    """Picked drafter folders that are gone (a run keeps only its newest checkpoint)."""
    return [p for p in picks if not Path(p).is_dir()]


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
