"""The ExitTrain comparison's set-up: where every variant starts from."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tevcore.drafters.block import read_config
from tevcore.train.compare import _shape, add_arguments, run
from tevcore.train.config import TrainConfig

ASSET = Path(__file__).resolve().parents[2] / "assets" / "drafter"


def test_a_fresh_start_takes_the_default_shape_of_a_new_drafter():
    defaults = TrainConfig(data="-")
    shape = _shape(None)
    assert shape == {k: getattr(defaults, k) for k in shape}
    TrainConfig(data="-", **shape)  # a valid config


def test_a_fine_tune_start_takes_the_starting_drafters_shape():
    saved = read_config(ASSET)
    shape = _shape(str(ASSET))
    assert (shape["depth"], shape["context"], shape["layers"], shape["draft_vocab"]) == (
        saved.depth, saved.context, saved.layers, saved.draft_vocab_size)


def test_the_start_variant_without_a_starting_drafter_is_refused_before_any_work(tmp_path):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "out"), "--data", str(tmp_path / "none"), "--variants", "start,distill"])
    with pytest.raises(ValueError, match="--init"):
        run(args)
    assert not (tmp_path / "out").exists()
