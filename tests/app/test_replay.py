"""The replay service re-scores a live round's tree to the rows the round was decoded with."""

from __future__ import annotations

import pytest

import appdata
from tevcore.config import DecodeConfig
from tevcore.decoding.loop import rounds
from tevcore.proposers import GreedyRolloutProposer


def test_a_rescored_round_reproduces_its_recorded_exit_mass(tiny_target):
    prompt = [5, 17, 42, 8]
    config = DecodeConfig(max_new_tokens=12, temperature=1.0, budget=6, seed=3, record="lean")
    records = list(rounds(tiny_target, GreedyRolloutProposer(depth=3), prompt, config))
    assert len(records) >= 3
    for index in (0, 2):
        logits, drift = appdata.rescored_logits(tiny_target, prompt, records, index)
        assert logits.shape == (records[index].tree.num_nodes, tiny_target.vocab_size)
        assert drift < 1e-5


def test_a_round_of_another_context_is_refused(tiny_target):
    config = DecodeConfig(max_new_tokens=6, temperature=0.0, budget=4, record="lean")
    records = list(rounds(tiny_target, GreedyRolloutProposer(depth=2), [5, 17, 42], config))
    with pytest.raises(ValueError, match="cannot re-score"):
        appdata.rescored_logits(tiny_target, [5, 17], records, 0)
