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


def test_the_recipe_options_reach_every_variant_and_a_tree_share_gives_all_of_them_the_same_batches():
    args = _args("--tree-share", "1", "--tree-budget", "32", "--tree-norm", "node", "--anchor-loss", "hard",
                 "--tree-pool", "64", "--batch-size", "16")
    plain, exit_train = (variant_config(args, name, _shape(None)) for name in ("distill", "exit-P-0.1"))
    batches = ("tree_share", "tree_anchors", "tree_pool", "tree_budget", "batch_size", "seed", "anchor_loss")
    assert [getattr(plain, k) for k in batches] == [getattr(exit_train, k) for k in batches] == \
        [1.0, 0, 64, 32, 16, 0, "hard"]
    assert (exit_train.tree_norm, exit_train.tree_anchor_count, plain.exit_train) == ("node", 16, False)
    extra = variant_config(_args("--tree-budget", "32"), "exit-P-0.1", _shape(None))
    assert (extra.tree_budget, extra.tree_anchors, extra.tree_norm, extra.anchor_loss) == (32, 8, "anchor", "soft")
