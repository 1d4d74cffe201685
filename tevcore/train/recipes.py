"""Training recipes: `TrainConfig`'s defaults with the ExitTrain loss on, and the fine-tuning numbers for a run
that starts from a trained drafter.

`TrainConfig`'s defaults are a from-scratch recipe (learning rate 1e-3, no
dropout). A run that starts from the committed drafter with them undoes part of
its training: that drafter's last stage ran at 1e-4 with dropout 0.1 and weight
decay 0.05 (`assets/drafter/how_made.json`), so fine-tuning keeps its
regularisation at a smaller rate.
The app's ExitTrain page opens with `recipe(...)`, and its Build makes a `SMALL_SET`; every number stays settable.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from tevcore.train.config import TrainConfig

EXIT_TRAIN = {"tree_lambda": 0.1, "tree_anchors": 8}  # the paper's ExitTrain: λ 0.1, a few tree anchors a step
# from a trained drafter: its last stage's regularisation, and a rate that moves it little. The page's default set is
# a few thousand tokens of the target's own responses (the kind that drafter's last stages saw two million of); on
# the teacher-forced set the page built before, every step pulled it toward text of another kind. Measured in the
# page's paired comparison (6 prompts per set, budgets 8 and 16; assets/notes/issue-42): teacher-forced set, 2e-5 x
# 200 steps -0.5% +- 0.5% and -0.9% +- 0.4%; teacher-forced, 5e-6 x 100 steps -0.12% +- 0.19% and -0.13% +- 0.23%;
# target-generated set, 2e-5 x 100 steps +0.45% +- 0.18% and -0.19% +- 0.23% (this recipe: not worse beyond 1 s.e.)
FINE_TUNE = {"lr": 2e-5, "warmup": 20, "dropout": 0.1, "weight_decay": 0.05}
SHORT_RUN = {"steps": 200, "checkpoint_every": 50, "max_shards": 8}  # a run that fits minutes on a CPU
SHORT_FINE_TUNE = {"steps": 100, "warmup": 10}  # a short fine-tune: about 1.2 passes over the page's default set
# the page's default set (DataConfig fields): the target's own responses only, no teacher-forced text; the kind the
# committed drafter's last stages trained on, and the kind FINE_TUNE was measured on
SMALL_SET = {"text_pairs": False, "python_files": 0}


def recipe(fine_tune: bool, short: bool = False) -> dict[str, Any]:
    """Every defaulted `TrainConfig` field's value in the ExitTrain recipe; `fine_tune`: the run starts from a trained
    drafter (`init`), so it keeps that drafter's regularisation at a small rate; `short`: `SHORT_RUN`'s size (and
    `SHORT_FINE_TUNE`'s when both: the size that was measured not to hurt the committed drafter)."""
    values = {f.name: f.default for f in fields(TrainConfig) if f.default is not MISSING}  # not `data`: no default
    values.update(EXIT_TRAIN)
    if short:
        values.update(SHORT_RUN)
    if fine_tune:
        values.update(FINE_TUNE)
    if short and fine_tune:
        values.update(SHORT_FINE_TUNE)
    return values
