from __future__ import annotations

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.models.cost import startup_cost
from faasml.models.offline import offline_estimate
from faasml.models.restart import switch_cost
from faasml.sim.synthetic import synthetic_curve
from faasml.types import Allocation
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda")
WORKLOAD = load_workload("mobilenet-cifar10")
OLD = Allocation(20, 2048, "s3", "allreduce")
NEW = Allocation(40, 3008, "s3", "allreduce")


def test_delayed_restart_hides_the_cold_start_and_the_pull() -> None:
    plain = switch_cost(WORKLOAD, CATALOG, OLD, 30.0, NEW, delayed=False)
    delayed = switch_cost(WORKLOAD, CATALOG, OLD, 30.0, NEW, delayed=True)
    cold = CATALOG.platform.cold_start_s
    assert plain.total_s == pytest.approx(delayed.total_s)
    assert plain.total_s > cold
    assert plain.hidden_s == 0.0 and plain.visible_s == pytest.approx(plain.total_s)
    assert delayed.delayed and delayed.visible_s == pytest.approx(0.0)
    assert delayed.hidden_share == pytest.approx(1.0)
    assert delayed.launch_after_s == pytest.approx(30.0 - cold)
    init = float(startup_cost(CATALOG.platform, NEW.n, NEW.memory_mb))
    assert delayed.cost_usd == pytest.approx(init)
    assert plain.cost_usd > delayed.cost_usd


def test_an_epoch_shorter_than_the_cold_start_leaves_part_of_it_visible() -> None:
    cold = CATALOG.platform.cold_start_s
    delayed = switch_cost(WORKLOAD, CATALOG, OLD, cold / 4, NEW, delayed=True)
    assert delayed.visible_s == pytest.approx(cold * 3 / 4)
    assert delayed.launch_after_s == 0.0


def test_no_delayed_restart_beyond_the_concurrency_limit() -> None:
    big = Allocation(900, 1024, "s3", "allreduce")
    switch = switch_cost(WORKLOAD, CATALOG, big, 30.0, Allocation(800, 1024, "s3"), delayed=True)
    assert not switch.delayed
    assert switch.hidden_s == 0.0


def test_keeping_the_allocation_costs_nothing() -> None:
    switch = switch_cost(WORKLOAD, CATALOG, OLD, 30.0, OLD, delayed=True)
    assert (switch.total_s, switch.cost_usd) == (0.0, 0.0)


def test_offline_estimate_extrapolates_a_sample_run() -> None:
    curve = synthetic_curve("inverse", 1.0, 30.0, noise=0.0)
    epochs = list(range(1, 11))
    losses = [float(curve.mean(k)) for k in epochs]
    estimate = offline_estimate(epochs, losses, 1.0, sample_fraction=0.1)
    assert estimate.epochs == 30
    assert estimate.sample_epochs == 10
    with pytest.raises(UnreachableTargetError):
        offline_estimate(epochs, losses, 0.1, sample_fraction=0.1)
    with pytest.raises(ConfigError, match="sample_fraction"):
        offline_estimate(epochs, losses, 1.0, sample_fraction=1.5)
