"""`--budget auto`: the cached forward-cost curve, nested-tree E(B), and the choice it makes."""

from __future__ import annotations

import json

import pytest

from tevcore.decoding.autobudget import (SAME_THROUGHPUT, choose_budget, curve_from_timings, curve_sizes,
                                expected_length_by_budget, forward_cost_curve, trim_costs)
from tevcore.proposers import GreedyRolloutProposer
from tevcore.proposers.lookup import ContextLookupProposer

PROMPTS = [[5, 9, 14, 3, 22, 7, 5, 9], [40, 41, 42, 43, 40, 41]]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEVCORE_CACHE", str(tmp_path))
    return tmp_path


def test_the_cost_curve_is_measured_once_then_read_back(tiny_target, cache):
    curve = forward_cost_curve(tiny_target, context_length=16, sizes=(0, 2, 4), repeats=2)
    assert set(curve) == {0, 2, 4} and all(seconds > 0 for seconds in curve.values())
    [stored] = list(cache.glob("forward-cost-*.json"))
    stored.write_text(json.dumps({"0": 1.0, "2": 2.0, "4": 3.0}))  # a cached curve is trusted as written
    assert forward_cost_curve(tiny_target, context_length=16, sizes=(0, 2, 4)) == {0: 1.0, 2: 2.0, 4: 3.0}
    assert forward_cost_curve(tiny_target, context_length=16, sizes=(0, 2, 4), repeats=1, refresh=True)[4] != 3.0


def test_expected_length_grows_with_the_budget(tiny_target):
    proposer = ContextLookupProposer(GreedyRolloutProposer(depth=3), chain_depth=3)
    lengths = expected_length_by_budget(tiny_target, proposer, PROMPTS, (1, 2, 4, 8), temperature=1.0,
                                        rounds_per_prompt=3)
    values = [lengths[b] for b in (1, 2, 4, 8)]
    assert all(1.0 <= v <= 4.0 for v in values)
    assert values == sorted(values)  # nested trees: a bigger budget never covers less


def test_the_choice_maximises_predicted_throughput(tiny_target, cache):
    choice = choose_budget(tiny_target, GreedyRolloutProposer(depth=2), PROMPTS, temperature=0.0, budgets=(1, 2, 4))
    assert set(choice.predicted_tokens_per_s) == {0, 1, 2, 4}
    best = max(choice.predicted_tokens_per_s.values())
    ties = [b for b, v in choice.predicted_tokens_per_s.items() if v >= best * (1 - SAME_THROUGHPUT)]
    assert choice.budget == min(ties)  # the best, or a smaller budget within 2% of it
    for b in (1, 2, 4):  # predicted = E(B) / (draft + forward(B)); budget 0 is plain decoding
        assert choice.predicted_tokens_per_s[b] == pytest.approx(
            choice.expected_length[b] / (choice.draft_seconds + choice.forward_seconds[b]))
    assert choice.predicted_tokens_per_s[0] == pytest.approx(1.0 / choice.forward_seconds[0])
    assert f"auto budget = {choice.budget}" in choice.explain()


def _store_curve(target, cache, curve: dict[int, float]) -> None:
    forward_cost_curve(target, sizes=tuple(curve), repeats=1)
    [stored] = list(cache.glob("forward-cost-*.json"))
    stored.write_text(json.dumps({str(k): v for k, v in curve.items()}))


def test_with_trimming_each_round_counts_what_it_would_keep(tiny_target, cache):
    proposer = GreedyRolloutProposer(depth=2)  # forecasts at most 1 + 2 tokens
    _store_curve(tiny_target, cache, {0: 0.1, 1: 0.5, 2: 0.5, 4: 0.5})  # trees cost 5 plain steps: none pays
    skipping = choose_budget(tiny_target, proposer, PROMPTS, temperature=0.0, budgets=(1, 2, 4), trim="auto")
    assert all(skipping.skipped_share[b] == 1.0 and skipping.expected_length[b] == 1.0 for b in (1, 2, 4))
    for b in (1, 2, 4):  # each round: the draft plus one plain step, for one token
        assert skipping.predicted_tokens_per_s[b] == pytest.approx(1.0 / (skipping.draft_seconds + 0.1))
    assert skipping.budget == 0 and "plain 100%" in skipping.explain()
    _store_curve(tiny_target, cache, {0: 0.1, 1: 0.1, 2: 0.5, 4: 0.5})  # one node is free, more cost 5
    one = choose_budget(tiny_target, proposer, PROMPTS, temperature=0.0, budgets=(1, 2, 4), trim="auto")
    assert all(one.kept_nodes[b] == 1.0 and one.skipped_share[b] == 0.0 for b in (1, 2, 4))
    assert one.predicted_tokens_per_s[4] == pytest.approx(one.predicted_tokens_per_s[1])
    plain = choose_budget(tiny_target, proposer, PROMPTS, temperature=0.0, budgets=(1, 2, 4))
    assert all(plain.skipped_share[b] == 0.0 and plain.kept_nodes[b] == b for b in (1, 2, 4))
    assert plain.expected_length[4] > 1.0


def test_trim_costs_are_off_flat_or_the_interpolated_curve(tiny_target, cache):
    assert trim_costs(tiny_target, [4, 8], "off") == {4: None, 8: None}
    assert trim_costs(tiny_target, [2], "1.5") == {2: (1.0, 1.5, 1.5)}
    assert curve_sizes([4, 8]) == (0, 1, 2, 4, 8) and curve_sizes([12]) == (0, 1, 2, 4, 8, 12)
    _store_curve(tiny_target, cache, {0: 0.1, 1: 0.11, 2: 0.12, 4: 0.15, 8: 0.2})
    costs = trim_costs(tiny_target, [4, 8], "auto")
    assert costs[4] == pytest.approx((1.0, 1.1, 1.2, 1.35, 1.5))
    assert len(costs[8]) == 9 and costs[8][6] == pytest.approx(1.75)
    with pytest.raises(ValueError, match="'off', 'auto' or a number"):
        trim_costs(tiny_target, [4], "sometimes")


def test_a_new_size_measures_the_whole_cached_curve_again(tiny_target, cache):
    _store_curve(tiny_target, cache, {0: 0.1, 2: 0.15, 8: 0.2})
    curve = forward_cost_curve(tiny_target, sizes=(0, 4, 8), repeats=1)  # 4 is new
    [stored] = list(cache.glob("forward-cost-*.json"))
    kept = json.loads(stored.read_text())  # one consistent measurement: 2 is measured again too
    assert set(kept) == {"0", "2", "4", "8"} and kept["2"] != 0.15 and set(curve) == {0, 4, 8}


def test_the_curve_prices_each_size_against_the_same_repeat_and_never_falls_with_size():
    times = {0: [0.02, 0.04, 0.02], 4: [0.03, 0.06, 0.02], 8: [0.024, 0.048, 0.03], 16: [0.05, 0.09, 0.05]}
    curve = curve_from_timings(times)  # repeat 2 ran at half speed; 4 once stalled below 0
    assert curve == pytest.approx({0: 0.02, 4: 0.03, 8: 0.03, 16: 0.05})


@pytest.mark.parametrize("stored", ["", "{broken", "[1, 2]", '{"0": "fast", "2": 2.0}', '{"x": 1.0}', '{"0": -1.0}'],
                         ids=["empty", "not-json", "a-list", "not-a-number", "not-a-size", "negative"])
def test_a_damaged_cached_curve_is_measured_again(tiny_target, cache, stored):
    curve = forward_cost_curve(tiny_target, context_length=16, sizes=(0, 2), repeats=1)
    [path] = list(cache.glob("forward-cost-*.json"))
    path.write_text(stored)
    again = forward_cost_curve(tiny_target, context_length=16, sizes=(0, 2), repeats=1)
    assert set(again) == set(curve) and all(seconds > 0 for seconds in again.values())
    assert set(json.loads(path.read_text())) == {"0", "2"}  # written again whole


@pytest.mark.parametrize("place", ["a-file", "under-a-file"])
def test_a_cache_that_cannot_be_written_still_gives_a_curve(tiny_target, tmp_path, monkeypatch, place):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("TEVCORE_CACHE", str(tmp_path / "file" if place == "a-file" else tmp_path / "file" / "cache"))
    curve = forward_cost_curve(tiny_target, context_length=16, sizes=(0, 2), repeats=1)
    assert set(curve) == {0, 2} and all(seconds > 0 for seconds in curve.values())
