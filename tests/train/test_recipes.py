"""The training recipes the app opens with: TrainConfig's numbers, ExitTrain's loss on, and fine-tuning numbers."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path

from tevcore.train.config import TrainConfig
from tevcore.train.recipes import EXIT_TRAIN, FINE_TUNE, recipe

HOW_MADE = Path(__file__).resolve().parents[2] / "assets" / "drafter" / "how_made.json"


def test_a_recipe_is_a_valid_config_of_every_field_and_only_the_named_numbers_differ_from_trainconfig():
    for fine_tune in (False, True):
        values = recipe(fine_tune, short=True)
        assert set(values) == {f.name for f in fields(TrainConfig) if f.default is not MISSING}
        TrainConfig.from_dict({**values, "data": "-"})  # the engine accepts it as it is
    new = recipe(False)
    changed = {name for name, value in new.items() if value != getattr(TrainConfig, name, None)}
    assert changed <= set(EXIT_TRAIN)
    assert new["tree_alpha"] == TrainConfig.tree_alpha  # the page's edge floor is the package's


def test_fine_tuning_keeps_the_committed_drafters_regularisation_at_no_higher_rate_than_its_last_stage():
    last = json.loads(HOW_MADE.read_text())["commands"][-1]
    fine = recipe(True)
    assert f"--dropout {fine['dropout']}" in last and f"--weight-decay {fine['weight_decay']}" in last
    last_rate = float(last.split("--lr ")[1].split()[0])
    assert fine["lr"] <= last_rate < TrainConfig.lr
    assert all(fine[name] == value for name, value in FINE_TUNE.items())
