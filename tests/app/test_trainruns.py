"""The ExitTrain page's helpers: drafters with identical weights, Compare's starting pair, the paired table and
command. (Run folders are read by `tevcore.train.runs`, runs started and stopped by `tevcore.room.training`: their
tests mirror the package.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trainruns
from tevcore.room.limits import SINGLE_USER
from tevcore.train.runs import list_runs


def _drafter(folder: Path, payload: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(payload)
    return folder


def test_identical_weight_files_are_found_and_compare_starts_with_two_drafters(tmp_path):
    a = _drafter(tmp_path / "run" / "checkpoint-20", b"weights A")
    (a / "trainer.pt").write_bytes(b"x")
    (tmp_path / "run" / "latest.json").write_text(json.dumps({"checkpoint": "checkpoint-20", "step": 20}))
    b = _drafter(tmp_path / "run" / "drafter", b"weights A")
    c = _drafter(tmp_path / "other", b"weights C")
    assert trainruns.identical_weights([str(a), str(b), str(c)]) == [(str(a), str(b))]
    assert trainruns.identical_weights([str(a), str(c)]) == []
    (tmp_path / "run" / "config.json").write_text("{}")
    pair = trainruns.default_comparison(list_runs(tmp_path))
    assert pair == [str(b), str(trainruns.DEFAULT_DRAFTER)]  # the newest checkpoint against the committed drafter
    assert trainruns.identical_weights(pair) == []


def test_paired_table_counts_the_prompts_a_meaningful_standard_error_needs():
    import drafter_compare
    from tevcore.train.eval import PairedCell, prompts_for_se

    cell = PairedCell(1.0, 8, "all", 6, 180, "A", "B", 2.0, 2.04, 0.04, 0.03)
    assert prompts_for_se(cell, 0.01) == 54  # 6 * (0.03 / 0.01)^2
    assert prompts_for_se(PairedCell(1.0, 8, "all", 1, 30, "A", "B", 2.0, 2.1, 0.1, float("nan")), 0.01) is None
    table = drafter_compare.paired_table([cell], resolution=0.01, sets=3)
    row = table.iloc[0]
    assert row["prompts per set for s.e. ≤ δ/2"] == 18  # s.e. <= 1% of E(A) / 2 = 0.01: 54 prompts over 3 sets
    assert row["prompts per set to resolve B - A"] == 5  # s.e. <= 0.04 / 2: ceil(6 * 2.25) = 14 -> 5 per set
    assert row["B - A %"] == pytest.approx(2.0)


def test_the_paired_command_is_the_clis(tmp_path):
    import drafter_compare
    from tevcore.train.eval_cli import add_arguments
    import argparse

    cmd = drafter_compare.paired_command("a", "b", [8, 16], 4, 1.0, 32, lookup=True)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(cmd[4:])
    assert (args.drafter, args.compare, args.budgets, args.per_set, args.lookup) == ("a", ["b"], "8,16", 4, True)
    assert args.temperatures == "1" and args.sample_sets == "mt-bench,humaneval,gsm8k"
    greedy = parser.parse_args(drafter_compare.paired_command("a", "b", [8], 2, 0.0, 16, lookup=False)[4:])
    assert greedy.greedy_sets == "humaneval" and not greedy.lookup


def test_the_runs_table_shows_a_stopped_run_as_resumable_and_a_torn_metrics_line_is_skipped(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": "x"}))
    (run / "status.json").write_text(json.dumps({"state": "interrupted", "pid": 2**22 + 4321, "step": 30,
                                                 "total_steps": 100, "updated": 30.0}))
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2}\n{"step": 2, "lo')
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "status.json").write_text("{oops")
    table = trainruns.runs_table(list_runs(tmp_path))
    assert dict(zip(table["run"], table["state"])) == {"r": "stopped (resumable)", "bad": "unreadable"}
    assert len(trainruns.metrics_frame(run, SINGLE_USER)) == 1
    assert trainruns.metrics_frame(tmp_path / "bad", SINGLE_USER).empty
