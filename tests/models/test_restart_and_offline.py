from __future__ import annotations

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.models.cost import startup_cost
from faasml.models.offline import offline_estimate
from faasml.models.restart import switch_cost, switch_costs
from faasml.models.space import evaluate
from faasml.sim.synthetic import synthetic_curve
from faasml.types import Allocation
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda")
WORKLOAD = load_workload("mobilenet-cifar10")
OLD = Allocation(20, 2048, "s3", "allreduce")
NEW = Allocation(40, 3008, "s3", "allreduce")


def epoch(allocation: Allocation) -> tuple[float, float]:
    row = evaluate(
        WORKLOAD,
        CATALOG,
        [allocation.n],
        [allocation.memory_mb],
        allocation.storage,
        allocation.scheme,
    )
    return float(row.time_s[0]), float(row.cost_usd[0])


def test_delayed_restart_takes_over_mid_epoch_and_hides_the_switch() -> None:
    plain = switch_cost(WORKLOAD, CATALOG, OLD, NEW, delayed=False)
    delayed = switch_cost(WORKLOAD, CATALOG, OLD, NEW, delayed=True)
    (old_s, _), (new_s, new_usd) = epoch(OLD), epoch(NEW)
    cold = CATALOG.platform.cold_start_s
    assert plain.total_s == pytest.approx(delayed.total_s)
    assert plain.total_s > cold
    assert plain.hidden_s == 0.0 and plain.visible_s == pytest.approx(plain.total_s)
    assert plain.epoch_s == pytest.approx(plain.total_s + new_s)
    assert delayed.delayed and delayed.mid_epoch
    assert delayed.visible_s == pytest.approx(0.0) and delayed.hidden_share == pytest.approx(1.0)
    # The switching epoch lies between a new epoch and an old one, and beats a plain restart.
    assert min(new_s, old_s) <= delayed.epoch_s <= max(new_s, old_s) + cold
    assert delayed.epoch_s < plain.epoch_s
    init = float(startup_cost(CATALOG.platform, NEW.n, NEW.memory_mb))
    assert delayed.cost_usd == pytest.approx(init)
    assert plain.cost_usd > delayed.cost_usd
    assert plain.epoch_usd == pytest.approx(new_usd + plain.cost_usd)
    assert delayed.epoch_usd > init


def test_an_epoch_shorter_than_the_start_leaves_part_of_it_visible() -> None:
    cold = CATALOG.platform.cold_start_s
    new = evaluate(WORKLOAD, CATALOG, [NEW.n], [NEW.memory_mb], NEW.storage, NEW.scheme)
    short = switch_costs(WORKLOAD, CATALOG, OLD, cold / 4, 0.01, new, delayed=True)
    assert bool(short.delayed[0]) and not bool(short.mid_epoch[0])
    assert float(short.visible_s[0]) == pytest.approx(cold * 3 / 4)
    assert float(short.epoch_s[0]) == pytest.approx(cold)


def test_no_delayed_restart_beyond_the_concurrency_limit() -> None:
    higgs = load_workload("lr-higgs")
    big = Allocation(600, 3008, "s3", "allreduce")
    switch = switch_cost(higgs, CATALOG, big, Allocation(500, 3008, "s3"), delayed=True)
    assert not switch.delayed
    assert switch.hidden_s == 0.0


def test_keeping_the_allocation_costs_nothing_extra() -> None:
    switch = switch_cost(WORKLOAD, CATALOG, OLD, OLD, delayed=True)
    assert (switch.total_s, switch.cost_usd) == (0.0, 0.0)
    assert (switch.epoch_s, switch.epoch_usd) == pytest.approx(epoch(OLD))


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
