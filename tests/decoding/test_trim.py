"""Per-round trimming: the prefix with the most forecast tokens per cost, and the cost specs."""

from __future__ import annotations

import pytest
import torch

from tevcore.config import parse_trim
from tevcore.decoding.trim import ForecastCalibration, best_prefix_size, flat_costs, interpolated_costs


def test_the_best_prefix_maximises_forecast_per_cost():
    probs = torch.tensor([0.5, 0.2, 0.1, 0.05])  # forecasts 1, 1.5, 1.7, 1.8, 1.85
    assert best_prefix_size(probs, (1.0, 1.1, 1.15, 1.5, 1.55)) == 2  # 1.7 / 1.15 beats 1.5 / 1.1 and 1.85 / 1.55
    assert best_prefix_size(probs, (1.0, 1.0, 1.0, 1.0, 1.0)) == 4  # free nodes: keep them all
    assert best_prefix_size(probs, (1.0, 3.0, 3.0, 3.0, 3.0)) == 0  # nothing pays: a plain step
    assert best_prefix_size(torch.tensor([]), (1.0,)) == 0


def test_ties_and_short_trees_keep_fewer_nodes():
    assert best_prefix_size(torch.tensor([1.0, 0.0]), (1.0, 2.0, 2.0)) == 0  # 1/1 == 2/2: the cheaper plain step
    assert best_prefix_size(torch.tensor([0.9, 0.9]), (1.0, 1.0, 1.0, 1.0, 1.0)) == 2  # a tree smaller than the budget


def test_a_flat_cost_is_the_keep_all_or_nothing_rule():
    costs = flat_costs(1.75, 3)
    assert costs == (1.0, 1.75, 1.75, 1.75)
    assert best_prefix_size(torch.tensor([0.5, 0.125, 0.125]), costs) == 0  # forecast 1.75 only ties 1.75
    assert best_prefix_size(torch.tensor([0.5, 0.25, 0.125]), costs) == 3  # 1.875 > 1.75: the whole tree


def test_costs_interpolate_the_measured_curve_relative_to_one_token():
    curve = {0: 0.1, 1: 0.11, 4: 0.14, 8: 0.2}
    costs = interpolated_costs(curve, 6)
    assert costs == pytest.approx((1.0, 1.1, 1.2, 1.3, 1.4, 1.55, 1.7))
    with pytest.raises(ValueError, match="not 0..16"):
        interpolated_costs(curve, 16)


@pytest.mark.parametrize("text, expected", [("off", "off"), ("auto", "auto"), ("1.5", 1.5)])
def test_trim_specs_parse(text, expected):
    assert parse_trim(text) == expected


@pytest.mark.parametrize("text, message", [("often", "'off', 'auto' or a number"), ("0", "finite number > 0"),
                                           ("nan", "finite number > 0"), ("-1", "finite number > 0")])
def test_bad_trim_specs_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_trim(text)


def test_a_larger_scale_keeps_more_of_the_tree():
    probs, costs = torch.tensor([0.3, 0.2, 0.1]), (1.0, 1.1, 1.4, 1.5)
    assert best_prefix_size(probs, costs) == 1  # 1.3 / 1.1 beats 1.5 / 1.4 and 1.6 / 1.5
    assert best_prefix_size(probs, costs, scale=3.0) == 3  # forecasts 1.9, 2.5, 2.8: the whole tree


def test_the_calibration_follows_what_scored_nodes_carried():
    calibration = ForecastCalibration(decay=0.5)
    assert calibration.scale == 1.0
    calibration.observe(torch.tensor([0.25, 0.25]), torch.tensor([1.0, 1.0]))  # (0.5 + 2) / (0.5 + 0.5)
    assert calibration.scale == pytest.approx(2.5)
    calibration.observe(torch.tensor([]), torch.tensor([]))  # a plain step teaches nothing
    assert calibration.scale == pytest.approx(2.5)
    calibration.observe(torch.tensor([1.0]), torch.tensor([0.0]))  # (1.25 + 0) / (0.5 + 1)
    assert calibration.scale == pytest.approx(1.25 / 1.5)
    with pytest.raises(ValueError, match="decay"):
        ForecastCalibration(decay=0.0)
