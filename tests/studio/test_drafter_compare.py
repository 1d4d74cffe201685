"""The ExitTrain page's drafter comparison: the paired table and command, and the requests checked once (their
values, and the room's caps before any wait in line)."""

from __future__ import annotations

import argparse

import pytest

from tevcore.room.limits import ROOM, CapExceeded
from tevcore.studio.drafter_compare import EvalRequest, PairedRequest, paired_command, paired_table
from tevcore.train.eval import PairedCell, prompts_for_se
from tevcore.train.eval_cli import add_arguments


def test_paired_table_counts_the_prompts_a_meaningful_standard_error_needs():
    cell = PairedCell(1.0, 8, "all", 6, 180, "A", "B", 2.0, 2.04, 0.04, 0.03)
    assert prompts_for_se(cell, 0.01) == 54  # 6 * (0.03 / 0.01)^2
    assert prompts_for_se(PairedCell(1.0, 8, "all", 1, 30, "A", "B", 2.0, 2.1, 0.1, float("nan")), 0.01) is None
    table = paired_table([cell], resolution=0.01, sets=3)
    row = table.iloc[0]
    assert row["prompts per set for s.e. ≤ δ/2"] == 18  # s.e. <= 1% of E(A) / 2 = 0.01: 54 prompts over 3 sets
    assert row["prompts per set to resolve B - A"] == 5  # s.e. <= 0.04 / 2: ceil(6 * 2.25) = 14 -> 5 per set
    assert row["B - A %"] == pytest.approx(2.0)


def test_the_paired_command_is_the_clis():
    cmd = paired_command("a", "b", [8, 16], 4, 1.0, 32, lookup=True)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(cmd[4:])
    assert (args.drafter, args.compare, args.budgets, args.per_set, args.lookup) == ("a", ["b"], "8,16", 4, True)
    assert args.temperatures == "1" and args.sample_sets == "mt-bench,humaneval,gsm8k"
    greedy = parser.parse_args(PairedRequest("a", "b", (8,), 2, 0.0, 16, lookup=False).command()[4:])
    assert greedy.greedy_sets == "humaneval" and not greedy.lookup


def test_a_request_is_checked_once_its_values_and_the_rooms_caps():
    with pytest.raises(ValueError, match="A and B are the same drafter"):
        PairedRequest("a", "a", (8,), 2, 1.0, 16, lookup=True)
    with pytest.raises(ValueError, match="budgets must be positive integers"):
        PairedRequest("a", "b", (0,), 2, 1.0, 16, lookup=True)
    with pytest.raises(ValueError, match="unknown proposer variant 'twice'"):
        EvalRequest(("a",), ("twice",), (4,), 1, 1.0, 16)
    with pytest.raises(CapExceeded, match="drafters compared 3 is over this server's cap of 2"):
        EvalRequest(("a", "b", "c"), ("alone",), (4,), 1, 1.0, 16).check(ROOM)
    with pytest.raises(CapExceeded, match=r"budget 128 is over this server's cap of 64"):
        PairedRequest("a", "b", (8, 128), 2, 1.0, 16, lookup=False).check(ROOM)
    assert EvalRequest(("a", "b"), ("alone", "+ lookup"), ("chain", 4), 1, 1.0, 16).specs() == [
        ("a", "alone", "a"), ("a", "+ lookup", "a+lookup"), ("b", "alone", "b"), ("b", "+ lookup", "b+lookup")]
