"""Training recipes: `TrainConfig`'s defaults with the ExitTrain loss on, and the fine-tuning numbers for a run
that starts from a trained drafter.

`TrainConfig`'s defaults are a from-scratch recipe (learning rate 1e-3, no
dropout). A run that starts from the committed drafter with them undoes part of
its training: that drafter's last stage ran at 1e-4 with dropout 0.1 and weight
decay 0.05 (`assets/drafter/how_made.json`), so fine-tuning keeps its
regularisation at a smaller rate.
The app's ExitTrain page opens with `recipe(...)`; every number stays settable.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from tevcore.train.config import TrainConfig

EXIT_TRAIN = {"tree_lambda": 0.1, "tree_anchors": 8}  # the paper's ExitTrain: λ 0.1, a few tree anchors a step
# from a trained drafter: its last stage's regularisation, and a rate that moves it little: the page's default set
# is a few thousand tokens where that drafter saw two million (at its last stage's 1e-4 the page's paired comparison
# found it 0.6-0.8% worse, 1.5-2 s.e.; at 2e-5 that comparison finds no loss, a larger one still -0.9% +- 0.4% at
# budget 16: assets/notes/issue-42)
FINE_TUNE = {"lr": 2e-5, "warmup": 20, "dropout": 0.1, "weight_decay": 0.05}
SHORT_RUN = {"steps": 200, "checkpoint_every": 50, "max_shards": 8}  # a run that fits minutes on a CPU


def recipe(fine_tune: bool, short: bool = False) -> dict[str, Any]:
    """Every defaulted `TrainConfig` field's value in the ExitTrain recipe; `fine_tune`: the run starts from a trained
    drafter (`init`), so it keeps that drafter's learning rate and regularisation; `short`: `SHORT_RUN`'s size."""
    values = {f.name: f.default for f in fields(TrainConfig) if f.default is not MISSING}  # not `data`: no default
    values.update(EXIT_TRAIN)
    if short:
        values.update(SHORT_RUN)
    if fine_tune:
        values.update(FINE_TUNE)
    return values
