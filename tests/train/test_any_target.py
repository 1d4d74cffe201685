"""A block drafter for a target that is not SmolLM2: build-data, train, eval-drafter and round, by the CLI.

The drafter records the target it was trained for; another target of the
same shape (other weights) is refused by name, and so is training on a set
built for another target.
"""

from __future__ import annotations

import json

import pytest

from tevcore.cli import main
from tevcore.proposers import resolve_proposer
from tevcore.results import read_result
from tevcore.target.loading import load_target


@pytest.fixture(scope="module")
def pipeline(tiny_model_folder, tmp_path_factory):
    """(target folder, data folder, drafter folder) after build-data and train on a tiny Llama."""
    folder = tiny_model_folder("llama", chat_template=True)
    root = tmp_path_factory.mktemp("any-target")
    data, run = root / "data", root / "run"
    assert main(["build-data", str(data), "--target", str(folder), "--device", "cpu", "--hidden-layers", "1,2",
                 "--context", "4", "--top-k", "8", "--max-new-tokens", "6", "--max-shards", "2",
                 "--python-files", "0", "--text-pairs", "false", "--sets", "mt-bench", "--gen-batch", "4"]) == 0
    assert main(["train", str(run), "--data", str(data), "--target", str(folder), "--device", "cpu",
                 "--depth", "3", "--context", "4", "--heads", "4", "--ffn", "32", "--draft-vocab", "64",
                 "--steps", "3", "--batch-size", "4", "--warmup", "1", "--checkpoint-every", "3"]) == 0
    return folder, data, run / "drafter"


def test_the_drafter_records_its_target_and_runs_in_eval_and_round(pipeline, tmp_path, capsys, one_thread):
    folder, _, drafter = pipeline
    record = json.loads((drafter / "config.json").read_text())["target"]
    assert record["name"] == folder.name and record["feature_layers"] == [1, 2]
    assert (record["hidden_size"], record["vocab_size"], record["layers"]) == (64, 128, 2)
    cells = tmp_path / "eval.json"
    assert main(["eval-drafter", str(drafter), "--target", str(folder), "--device", "cpu", "--budgets", "4",
                 "--temperatures", "0", "--per-set", "1", "--max-new-tokens", "6", "--json", str(cells)]) == 0
    assert read_result(cells).rows
    out = tmp_path / "round.jsonl"
    assert main(["round", "--target", str(folder), "--proposer", str(drafter), "--prompt", "abcab", "--no-chat",
                 "--device", "cpu", "--budget", "4", "--out", str(out)]) == 0
    assert "block drafter" in capsys.readouterr().out and out.is_file()


def test_another_target_of_the_same_shape_is_refused_by_name(pipeline, tiny_model_folder, tmp_path, capsys):
    folder, data, drafter = pipeline
    other = tiny_model_folder("llama", seed=1, chat_template=True)
    with pytest.raises(ValueError, match=f"trained for target {folder.name}, not for {other.name}"):
        resolve_proposer(str(drafter), load_target(str(other), device="cpu"))
    code = main(["train", str(tmp_path / "run"), "--data", str(data), "--target", str(other), "--device", "cpu",
                 "--depth", "3", "--context", "4", "--heads", "4", "--ffn", "32", "--steps", "1", "--batch-size", "2"])
    assert code == 2 and f"built for target {folder.name}, not for {other.name}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_feature_layers_past_the_target_are_refused(tiny_model_folder, tmp_path, capsys):
    folder = tiny_model_folder("llama", chat_template=True)
    code = main(["build-data", str(tmp_path / "data"), "--target", str(folder), "--device", "cpu", "--max-shards", "1",
                 "--hidden-layers", "8,16,24,30"])  # SmolLM2's layers; the default is derived from the target
    assert code == 2 and "--hidden-layers" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("budget", [511, 100000])
def test_a_tree_budget_the_context_cannot_hold_is_refused_naming_it(pipeline, tmp_path, capsys, budget):
    """Issue 51: the pool's sequences were cut to nothing and the run failed with "the prompt has no tokens"."""
    folder, data, _ = pipeline
    code = main(["train", str(tmp_path / "run"), "--data", str(data), "--target", str(folder), "--device", "cpu",
                 "--depth", "3", "--context", "4", "--heads", "4", "--ffn", "32", "--draft-vocab", "64", "--steps", "1",
                 "--batch-size", "4", "--tree-anchors", "2", "--tree-lambda", "0.1", "--tree-budget", str(budget)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "no tokens" not in err
    assert f"tree_budget {budget} (--tree-budget)" in err and "exceeds the model's context of 512 tokens; give at " \
        "most 510" in err
    assert not (tmp_path / "run").exists()
