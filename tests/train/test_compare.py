"""The ExitTrain comparison's set-up: where every variant starts from."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tevcore.proposers.block import read_config
from tevcore.train.compare import _shape, add_arguments, run, variant_config
from tevcore.train.config import TrainConfig

ASSET = Path(__file__).resolve().parents[2] / "assets" / "drafter"


def _args(*extra: str, out: str = "out", data: str = "d") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args([out, "--data", data, *extra])


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
    args = _args("--variants", "start,distill", out=str(tmp_path / "out"), data=str(tmp_path / "none"))
    with pytest.raises(ValueError, match="--init"):
        run(args)
    assert not (tmp_path / "out").exists()


def test_plain_distillation_takes_no_tree_settings_so_one_run_serves_every_tree_setting():
    small, large = _args("--tree-pool", "16", "--tree-alpha", "0.01"), _args("--tree-pool", "1024")
    assert variant_config(small, "distill", _shape(None)) == variant_config(large, "distill", _shape(None))
    exit_small, exit_large = (variant_config(a, "exit-F-1.0", _shape(None)) for a in (small, large))
    assert (exit_small.tree_pool, exit_small.tree_alpha, exit_small.tree_weight) == (16, 0.01, "flow")
    assert exit_large.tree_pool == 1024 and exit_large.tree_lambda == 1.0


def test_encoder_dropout_with_a_dflash_start_is_refused_before_any_work(tmp_path):
    args = _args("--init", f"dflash:{tmp_path / 'drafter'}", "--dropout", "0.1", out=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="--dropout applies to block drafters"):
        run(args)
    assert not (tmp_path / "out").exists()
