"""`train --init dflash:<folder>`: distillation and ExitTrain on a published-format DFlash drafter, saved back.

A few steps on a tiny Qwen3 target; the saved folder keeps the published
layout (same config.json, same tensor names) and the DFlash proposer loads
it with the rows the trained drafter had in memory.
"""

from __future__ import annotations

import json

import pytest
from tiny_models import save_tiny_distillation_set
import torch
from safetensors.torch import load_file

import tevcore.proposers.dflash_training as dflash_train
from dflash_checkpoints import dflash_config, write_dflash
from tevcore.cli import main
from tevcore.proposers import resolve_proposer
from tevcore.proposers.dflash import DFlashProposer
from tevcore.target.loading import load_target
from tevcore.target.session import TargetSession

PROMPT = [1, 40, 41, 50, 60, 70, 41, 42, 43]


def _rows(proposer) -> torch.Tensor:
    session = TargetSession(proposer.target, hidden_layers=proposer.hidden_layers)
    session.prefill(PROMPT, reserve=8)
    return proposer.propose(session).shared


@pytest.fixture(scope="module")
def setup(tiny_model_folder, tmp_path_factory):
    """(target folder, target, distillation set, DFlash checkpoint) for a tiny Qwen3."""
    folder = tiny_model_folder("qwen3")
    target = load_target(str(folder), device="cpu")
    root = tmp_path_factory.mktemp("dflash-train")
    save_tiny_distillation_set(target, folder, root / "data")
    checkpoint = write_dflash(root / "dflash", dflash_config(64, 128, 2, block_size=4), seed=5)
    return folder, target, root / "data", checkpoint


SLIDING = {"layer_types": ["sliding_attention", "full_attention"], "use_sliding_window": True, "sliding_window": 3}


@pytest.mark.parametrize("tree_lambda,layers", [("0", "full"), ("0.1", "full"), ("0.1", "sliding")])
def test_fine_tune_saves_a_checkpoint_the_proposer_loads(setup, tmp_path, monkeypatch, one_thread, tree_lambda,
                                                         layers):
    folder, target, data, checkpoint = setup
    if layers == "sliding":  # a causal sliding layer (window 3) and a full one: masks in training and save
        checkpoint = write_dflash(tmp_path / "sliding", dflash_config(64, 128, 2, block_size=4, **SLIDING), seed=5)
    before = _rows(resolve_proposer(f"dflash:{checkpoint}", target))
    trained_rows = {}
    save = dflash_train.save_dflash

    def save_and_remember(drafter, spec, where, *args, **kw):
        trained_rows["rows"] = _rows(DFlashProposer(drafter, spec, target))
        return save(drafter, spec, where, *args, **kw)

    monkeypatch.setattr(dflash_train, "save_dflash", save_and_remember)
    run = tmp_path / "run"
    tree = ["--tree-anchors", "2", "--tree-pool", "4", "--tree-budget", "4"] if tree_lambda != "0" else []
    assert main(["train", str(run), "--data", str(data), "--target", str(folder), "--init", f"dflash:{checkpoint}",
                 "--device", "cpu", "--depth", "3", "--context", "4", "--steps", "3", "--batch-size", "2",
                 "--warmup", "1", "--lr", "0.01", "--tree-lambda", tree_lambda, *tree]) == 0
    saved = run / "drafter"
    assert json.loads((saved / "config.json").read_text()) == json.loads((checkpoint / "config.json").read_text())
    assert set(load_file(str(saved / "model.safetensors"))) == set(load_file(str(checkpoint / "model.safetensors")))
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 3 and all(("tree" in m) == (tree_lambda != "0") for m in metrics)
    after = _rows(resolve_proposer(f"dflash:{saved}", target))
    assert torch.allclose(after, trained_rows["rows"], atol=1e-6)  # saved and reloaded as trained
    assert not torch.allclose(after, before, atol=1e-3)  # the steps moved the drafter


def test_a_depth_past_the_block_is_refused_before_anything_is_written(setup, tmp_path, capsys):
    folder, _, data, checkpoint = setup
    code = main(["train", str(tmp_path / "run"), "--data", str(data), "--target", str(folder), "--init",
                 f"dflash:{checkpoint}", "--device", "cpu", "--depth", "6", "--context", "4", "--steps", "1"])
    assert code == 2 and "exceeds the DFlash drafter's 3" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_compare_fine_tunes_one_dflash_drafter_both_ways_and_scores_each(setup, tmp_path, one_thread, capsys):
    """`compare --init dflash:...` on a tiny Qwen3: both variants trained, saved, reloaded and evaluated."""
    from tevcore.results import read_result
    from tevcore.train.eval import evaluate, eval_prompts

    folder, target, data, checkpoint = setup
    prompts_file = tmp_path / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("abcabcab", "hello there")))
    out = tmp_path / "compare"
    assert main(["compare", str(out), "--data", str(data), "--target", str(folder), "--device", "cpu",
                 "--init", f"dflash:{checkpoint}", "--variants", "distill,exit-F-1.0", "--steps", "2",
                 "--batch-size", "2", "--warmup", "1", "--lr", "0.01", "--tree-anchors", "2", "--tree-pool", "4",
                 "--budgets", "4", "--sets", str(prompts_file), "--per-set", "2", "--max-new-tokens", "4",
                 "--temperature", "1"]) == 0
    table = capsys.readouterr().out
    assert "distill" in table and "exit-F-1.0" in table
    report = read_result(out / "compare.json")
    assert report.command == "compare" and report.partial is None
    rows = {row["variant"]: row for row in report.rows}
    assert list(rows) == ["distill", "exit-F-1.0"] and report.settings["prompts"] == 2
    assert rows["distill"]["train_tree_E_last10"] is None  # plain distillation builds no trees
    assert 1.0 < rows["exit-F-1.0"]["train_tree_E_last10"] < 4.0
    prompts = eval_prompts((str(prompts_file),), 2)
    for name, cell in rows.items():
        saved = out / name / "drafter"
        assert json.loads((saved / "config.json").read_text())["architectures"] == ["DFlashDraftModel"]
        again = evaluate(target, DFlashProposer.load(str(saved), target), prompts, 1.0, [4], 4, progress=False)
        assert 1.0 < cell["expected_length"] < 5.0 and cell["mean_emitted"] >= 1.0
        assert cell["expected_length"] == pytest.approx(again[0].expected_length, abs=1e-6)  # computed, not filled in
        assert cell["mean_emitted"] == pytest.approx(again[0].mean_emitted, abs=1e-6)
    (paired,) = report.summary["paired_vs_first"]["exit-F-1.0"]
    assert paired["baseline"] == "distill" and paired["other"] == "exit-F-1.0" and paired["positions"] > 0
    assert paired["difference"] == pytest.approx(paired["other_length"] - paired["baseline_length"], abs=1e-9)


def _train_args(run, data, folder, checkpoint, steps="4"):
    return ["train", str(run), "--data", str(data), "--target", str(folder), "--init", f"dflash:{checkpoint}",
            "--device", "cpu", "--depth", "3", "--context", "4", "--steps", steps, "--batch-size", "2",
            "--warmup", "1", "--lr", "0.01", "--checkpoint-every", "2", "--tree-lambda", "0.1",
            "--tree-anchors", "2", "--tree-pool", "4", "--tree-budget", "4"]


def test_an_interrupted_fine_tune_resumes_at_its_checkpoint_and_ends_as_an_uninterrupted_one(
        setup, tmp_path, monkeypatch, one_thread):
    import tevcore.train.loop as loop

    folder, target, data, checkpoint = setup
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    assert main(_train_args(whole, data, folder, checkpoint)) == 0
    real_step, steps_taken = loop.optimizer_step, []

    def step_then_stop(*args, **kw):
        if len(steps_taken) == 3:  # step 3 of 4: after the checkpoint of step 2
            raise KeyboardInterrupt
        steps_taken.append(1)
        return real_step(*args, **kw)

    monkeypatch.setattr(loop, "optimizer_step", step_then_stop)
    assert main(_train_args(parted, data, folder, checkpoint)) == 130  # Ctrl-C: one line, exit status 130
    assert json.loads((parted / "latest.json").read_text())["step"] == 2 and not (parted / "drafter").exists()
    saved = parted / "checkpoint-2"
    assert json.loads((saved / "config.json").read_text()) == json.loads((checkpoint / "config.json").read_text())
    assert json.loads((parted / "status.json").read_text())["state"] == "interrupted"
    steps_taken.clear()
    monkeypatch.setattr(loop, "optimizer_step", lambda *a, **kw: (steps_taken.append(1), real_step(*a, **kw))[1])
    assert main(_train_args(parted, data, folder, checkpoint)) == 0
    assert len(steps_taken) == 2  # steps 3 and 4 only
    lines = [json.loads(line) for line in (parted / "metrics.jsonl").read_text().splitlines()]
    reference = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3, 4]
    assert [m["loss"] for m in lines] == pytest.approx([m["loss"] for m in reference], abs=1e-6)
    a, b = (load_file(str(run / "drafter" / "model.safetensors")) for run in (whole, parted))
    assert set(a) == set(b) and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert not all(torch.equal(a[k], load_file(str(checkpoint / "model.safetensors"))[k]) for k in a)


def test_resuming_with_another_config_is_refused(setup, tmp_path, one_thread, capsys):
    folder, _, data, checkpoint = setup
    run = tmp_path / "run"
    assert main(_train_args(run, data, folder, checkpoint, steps="2")) == 0
    capsys.readouterr()
    assert main(_train_args(run, data, folder, checkpoint, steps="3")) == 2
    assert "another config" in capsys.readouterr().err

