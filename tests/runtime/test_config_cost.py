"""What a trial's configuration costs relative to the search space's mean (pure logic), and
that a tuning run prices the trials it draws from the costs its probe measured."""

from __future__ import annotations

import json

import pytest

from faasml.models.config_cost import config_text, factor, mean_factor, relative_costs

WIDTHS = relative_costs([{"model.width": 8}, {"model.width": 16}], [1.0, 3.0])


def test_relative_costs_are_over_the_mean() -> None:
    assert (
        (config_text({"model.width": 8}), 0.5),
        (config_text({"model.width": 16}), 1.5),
    ) == WIDTHS
    with pytest.raises(ValueError, match="2 configurations but 1 timings"):
        relative_costs([{"a": 1}, {"a": 2}], [1.0])


def test_a_measured_configuration_gets_its_own_cost_and_others_are_ignored() -> None:
    assert factor({"model.width": 8, "optimizer.lr": 0.01}, WIDTHS) == pytest.approx(0.5)
    assert factor({"model.width": 16}, WIDTHS) == pytest.approx(1.5)


def test_a_value_between_the_extremes_is_interpolated_and_outside_them_clipped() -> None:
    assert factor({"model.width": 12}, WIDTHS) == pytest.approx(1.0)
    assert factor({"model.width": 10}, WIDTHS) == pytest.approx(0.75)
    assert factor({"model.width": 32}, WIDTHS) == pytest.approx(1.5)


def test_two_keys_interpolate_multilinearly() -> None:
    corners = [
        {"model.width": 8, "batch_size": 32},
        {"model.width": 8, "batch_size": 64},
        {"model.width": 16, "batch_size": 32},
        {"model.width": 16, "batch_size": 64},
    ]
    costs = relative_costs(corners, [1.0, 2.0, 3.0, 6.0])  # mean 3
    assert factor({"model.width": 16, "batch_size": 64}, costs) == pytest.approx(2.0)
    middle = (1.0 + 2.0 + 3.0 + 6.0) / 4 / 3
    assert factor({"model.width": 12, "batch_size": 48}, costs) == pytest.approx(middle)
    # A corner the probe did not build is left out of the weights; alone, the mean stands.
    partial = costs[1:]
    assert factor({"model.width": 12, "batch_size": 48}, partial) == pytest.approx(11 / 3 / 3)
    assert factor({"model.width": 8, "batch_size": 32}, partial) == 1.0


def test_non_numeric_values_match_exactly_else_the_mean() -> None:
    costs = relative_costs([{"model.hidden": [32]}, {"model.hidden": [64, 64]}], [1.0, 3.0])
    assert factor({"model.hidden": [64, 64]}, costs) == pytest.approx(1.5)
    assert factor({"model.hidden": [128]}, costs) == 1.0
    assert json.loads(costs[1][0]) == {"model.hidden": [64, 64]}


def test_nothing_measured_means_the_mean() -> None:
    assert factor({"model.width": 8}, ()) == 1.0
    assert factor({"model.width": 8}, relative_costs([{}], [2.0])) == 1.0
    assert mean_factor([], WIDTHS) == 1.0
    assert mean_factor([{"model.width": 8}, {"model.width": 8}, {"model.width": 16}], WIDTHS) == (
        pytest.approx((0.5 + 0.5 + 1.5) / 3)
    )
