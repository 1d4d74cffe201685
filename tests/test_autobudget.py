"""`--budget auto`: the cached forward-cost curve, nested-tree E(B), and the choice it makes."""

from __future__ import annotations

import json

import pytest

from tevcore.autobudget import choose_budget, expected_length_by_budget, forward_cost_curve, skip_thresholds
from tevcore.drafters import GreedyRolloutProposer
from tevcore.drafters.lookup import ContextLookupProposer

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
    assert choice.budget in (0, 1, 2, 4)
    best = max(choice.predicted_tokens_per_s.values())
    assert choice.predicted_tokens_per_s[choice.budget] == best
    for b in (1, 2, 4):  # predicted = E(B) / (draft + forward(B)); budget 0 is plain decoding
        assert choice.predicted_tokens_per_s[b] == pytest.approx(
            choice.expected_length[b] / (choice.draft_seconds + choice.forward_seconds[b]))
    assert choice.predicted_tokens_per_s[0] == pytest.approx(1.0 / choice.forward_seconds[0])
    assert f"auto budget = {choice.budget}" in choice.explain()


def test_with_the_skip_rule_rounds_that_forecast_too_little_count_as_plain_steps(tiny_target, cache):
    forward_cost_curve(tiny_target, sizes=(0, 1, 2, 4), repeats=1)
    [stored] = list(cache.glob("forward-cost-*.json"))
    stored.write_text(json.dumps({"0": 0.1, "1": 0.5, "2": 0.5, "4": 0.5}))  # trees cost 5 plain steps
    proposer = GreedyRolloutProposer(depth=2)  # forecasts at most 1 + 2 tokens < 5: every round skips
    skipping = choose_budget(tiny_target, proposer, PROMPTS, temperature=0.0, budgets=(1, 2, 4), skip_below="auto")
    assert all(skipping.skipped_share[b] == 1.0 and skipping.expected_length[b] == 1.0 for b in (1, 2, 4))
    for b in (1, 2, 4):  # each round: one token for the draft plus one plain step
        assert skipping.predicted_tokens_per_s[b] == pytest.approx(1.0 / (skipping.draft_seconds + 0.1))
    assert skipping.budget == 0 and "skipped 100%" in skipping.explain()
    plain = choose_budget(tiny_target, proposer, PROMPTS, temperature=0.0, budgets=(1, 2, 4))
    assert all(plain.skipped_share[b] == 0.0 for b in (1, 2, 4)) and plain.expected_length[4] > 1.0


def test_skip_thresholds_are_a_number_or_the_measured_cost_ratio(tiny_target, cache):
    assert skip_thresholds(tiny_target, [4, 8], "1.5") == {4: 1.5, 8: 1.5}
    forward_cost_curve(tiny_target, sizes=(0, 4, 8), repeats=1)
    [stored] = list(cache.glob("forward-cost-*.json"))
    stored.write_text(json.dumps({"0": 0.1, "4": 0.15, "8": 0.2}))
    assert skip_thresholds(tiny_target, [4, 8], "auto") == {4: pytest.approx(1.5), 8: pytest.approx(2.0)}
    with pytest.raises(ValueError, match="number or 'auto'"):
        skip_thresholds(tiny_target, [4], "sometimes")
