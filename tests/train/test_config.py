"""The training config is strict: typed values validated, unknown keys rejected; the CLI dry run prints the plan."""

from __future__ import annotations

import argparse

import pytest

from tevcore.train import train_cli
from tevcore.train.config import TrainConfig


def test_defaults_are_plain_distillation():
    config = TrainConfig(data="d")
    assert not config.exit_train and config.tree_lambda == 0.0


def test_unknown_keys_are_rejected():
    with pytest.raises(ValueError, match="unknown training config keys: \\['lamda'\\]"):
        TrainConfig.from_dict({"data": "d", "lamda": 0.1})


@pytest.mark.parametrize("bad, words", [
    ({"steps": 0}, "steps"), ({"lr": -1.0}, "lr"), ({"tree_weight": "both"}, "tree_weight"),
    ({"tree_alpha": 1.5}, "tree_alpha"), ({"tree_lambda": 0.1, "tree_anchors": 0}, "tree_anchors"),
    ({"batch_size": True}, "batch_size"), ({"min_lr_ratio": 2.0}, "min_lr_ratio"),
    ({"known_prob": 1.5}, "known_prob"), ({"layers": 0}, "layers"), ({"layers": True}, "layers"),
    ({"anchor_loss": "one-hot"}, "anchor_loss"), ({"tree_norm": "tree"}, "tree_norm"),
    ({"tree_share": 1.5}, "tree_share"), ({"tree_share": 0.5, "tree_anchors": 4}, "not both"),
    ({"tree_share": 0.001, "batch_size": 8}, "gives no tree anchor"),
])
def test_invalid_values_fail_on_construction(bad, words):
    with pytest.raises(ValueError, match=words):
        TrainConfig(data="d", **bad)


def test_dry_run_prints_the_plan(tiny_data, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "run"), "--data", str(tiny_data), "--tree-lambda", "0.1",
                              "--tree-anchors", "4", "--dry-run"])
    assert train_cli.run(args) == 0
    out = capsys.readouterr().out
    assert "ExitTrain (lambda=0.1" in out and '"tree_anchors": 4' in out
    assert not (tmp_path / "run").exists()


def test_the_recipe_options_reach_the_config_from_the_train_flags(tiny_data, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "run"), "--data", str(tiny_data), "--tree-lambda", "0.1",
                              "--tree-share", "0.25", "--batch-size", "8", "--tree-budget", "32", "--tree-norm",
                              "node", "--anchor-loss", "hard", "--dry-run"])
    config = train_cli.config_from_args(args)
    assert (config.tree_share, config.tree_anchor_count, config.tree_budget, config.tree_norm, config.anchor_loss) \
        == (0.25, 2, 32, "node", "hard")
    assert train_cli.run(args) == 0
    assert "B=32, norm=node" in capsys.readouterr().out
