"""The proposer flag group: declared once, the same on every command that loads a proposer."""

from __future__ import annotations

import pytest

from tevcore.cli import main

TAKE_A_PROPOSER = ["round", "generate", "bench", "rounds-at-context", "eval-drafter", "compare"]


@pytest.mark.parametrize("command", TAKE_A_PROPOSER)
def test_every_command_that_loads_a_proposer_takes_the_whole_group(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "--drafter-dtype" in out and "--branches" in out


@pytest.mark.parametrize("command", ["round", "bench", "rounds-at-context"])
def test_a_negative_branch_count_is_refused_before_anything_loads(command, capsys):
    with pytest.raises(SystemExit) as raised:
        main([command, "--prompt", "x", "--branches", "-1", "--target", "/no/such/model"])
    assert raised.value.code == 2 and "--branches: must be an integer >= 0, got -1" in capsys.readouterr().err
