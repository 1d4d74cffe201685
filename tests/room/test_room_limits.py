"""Caps: one line naming the cap, two profiles, a host's changes checked, and the request checks."""

from __future__ import annotations

import pytest

from tevcore.config import DecodeConfig
from tevcore.room import guarded
from tevcore.room.limits import ROOM, SINGLE_USER, CapExceeded
from tevcore.train.config import TrainConfig


def test_a_value_at_the_cap_passes_and_one_past_it_is_refused_naming_the_cap():
    ROOM.check("budget", ROOM.budget)
    with pytest.raises(CapExceeded, match=r"^tree budget 65 is over this server's cap of 64 \(budget\)$"):
        ROOM.check("budget", 65, "tree budget")


def test_the_room_profile_is_never_looser_than_the_single_user_one():
    for name, value in vars(ROOM).items():
        assert value <= getattr(SINGLE_USER, name), name


def test_a_host_changes_caps_by_name_and_a_wrong_name_or_value_is_refused():
    assert ROOM.with_caps(budget=16).budget == 16
    with pytest.raises(ValueError, match="no cap named budgett"):
        ROOM.with_caps(budgett=16)
    with pytest.raises(ValueError, match="positive whole numbers: draws"):
        ROOM.with_caps(draws=0)


def test_a_decode_request_past_the_room_caps_is_refused_and_passes_the_single_user_ones():
    config = DecodeConfig(max_new_tokens=1024, budget=512)
    assert guarded.check_decode(SINGLE_USER, config) is config
    with pytest.raises(CapExceeded, match="tree budget 512 .* cap of 64"):
        guarded.check_decode(ROOM, config)
    with pytest.raises(CapExceeded, match="max new tokens 1024"):
        guarded.check_decode(ROOM, DecodeConfig(max_new_tokens=1024, budget=8))


@pytest.mark.parametrize("call, cap", [
    (lambda: guarded.check_sampled(ROOM, ROOM.sampled_rounds + 1, 8), "sampled_rounds"),
    (lambda: guarded.check_sampled(ROOM, 10, ROOM.sampled_budget + 1), "sampled_budget"),
    (lambda: guarded.check_draws(ROOM, ROOM.draws + 1), "draws"),
    (lambda: guarded.check_coupling(ROOM, ROOM.coupling_rounds + 1), "coupling_rounds"),
    (lambda: guarded.check_compare(ROOM, [4, 8, 16, 32], 1, 8, 1), "compare_budgets"),
    (lambda: guarded.check_compare(ROOM, [4, 10_000], 1, 8, 1), "compare_budget"),
    (lambda: guarded.check_compare(ROOM, [4], ROOM.prompts + 1, 8, 1), "prompts"),
    (lambda: guarded.check_compare(ROOM, [4], 1, ROOM.new_tokens + 1, 1), "new_tokens"),
    (lambda: guarded.check_compare(ROOM, ["chain"], 1, 8, 3), "compare_drafters"),
    (lambda: guarded.check_training(ROOM, TrainConfig(data="d", steps=ROOM.train_steps + 1, checkpoint_every=1000)),
     "train_steps"),
    (lambda: guarded.check_training(ROOM, TrainConfig(data="d", steps=10, batch_size=ROOM.train_batch + 1)),
     "train_batch"),
    (lambda: guarded.check_toy_rounds(ROOM, ROOM.toy_rounds + 1, 8), "toy_rounds"),
    (lambda: guarded.check_data(ROOM, ROOM.data_shards + 1), "data_shards"),
])
def test_every_request_check_names_its_cap(call, cap):
    with pytest.raises(CapExceeded, match=rf"\({cap}\)$"):
        call()
