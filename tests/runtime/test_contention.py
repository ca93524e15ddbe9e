"""A machine-bounded platform shares its cores (pure): functions demanding more vCPUs than the
machine delivers run slower, in the stage estimate and in the measured epochs re-calibration
reads; an unbounded platform (public FaaS) never slows."""

from __future__ import annotations

import dataclasses

import pytest

from faasml.catalog import Catalog, load_catalog
from faasml.models.calibration import Calibration
from faasml.models.contention import (
    cold_start_alone,
    delivered_vcpus,
    faster_solo,
    solo_disturbed,
)
from faasml.runtime.profile.measure import planning_inputs
from faasml.runtime.profile.record import JobProfile
from faasml.runtime.runs.stage_pricing import stage_estimate, wave_demand
from faasml.types import Allocation
from faasml.workload import Workload

from .table_workload import table_workload


def _bounded(delivered: float | None) -> Catalog:
    """The local catalog with a 2-vCPU machine that delivers ``delivered`` of them."""
    catalog = load_catalog("local")
    platform = dataclasses.replace(
        catalog.platform,
        capacity_vcpus=2.0,
        max_vcpus=2.0,
        concurrency_limit=32,
        capacity_memory_mb=16384.0,
        memory_max_mb=16384,
        delivered_vcpus=delivered,
    )
    return dataclasses.replace(catalog, platform=platform)


@pytest.fixture
def workload() -> Workload:
    return table_workload(((128.0, 0.9), (1769.0, 0.2), (3538.0, 0.1)))


def test_contention_is_demand_over_what_the_machine_delivers() -> None:
    platform = _bounded(1.5).platform
    assert platform.contention(1.0) == 1.0  # within what it delivers: no slower
    assert platform.contention(1.5) == 1.0
    assert platform.contention(3.0) == pytest.approx(2.0)
    assert _bounded(None).platform.contention(3.0) == pytest.approx(1.5)  # its capacity
    assert load_catalog("aws-lambda").platform.contention(1000.0) == 1.0  # unbounded


def test_a_wave_that_fills_the_machine_is_slower_where_it_delivers_less(
    workload: Workload,
) -> None:
    allocation = Allocation(1, 1769, "embedded")  # one vCPU: two trials fill two cores
    assert wave_demand(_bounded(None), allocation, 2) == pytest.approx(2.0)
    full = stage_estimate(workload, _bounded(None), allocation, 2, 1)
    busy = stage_estimate(workload, _bounded(1.0), allocation, 2, 1)
    assert busy[0] == pytest.approx(2.0 * full[0])  # start and epoch both twice as long
    assert busy[1] > 1.5 * full[1]  # the functions bill the longer time
    # One trial alone demands one vCPU, which the machine delivers: no slower.
    assert stage_estimate(workload, _bounded(1.0), allocation, 1, 1) == pytest.approx(
        stage_estimate(workload, _bounded(None), allocation, 1, 1)
    )


def test_only_the_crowded_waves_are_slower(workload: Workload) -> None:
    allocation = Allocation(1, 1769, "embedded")
    catalog = _bounded(1.0)
    two, three = (stage_estimate(workload, catalog, allocation, q, 1, warm=2) for q in (2, 3))
    one = stage_estimate(workload, catalog, allocation, 1, 1, warm=2)
    # Three trials: a wave of two (twice as slow) then one alone.
    assert three[0] == pytest.approx(two[0] + one[0])
    assert three[1] == pytest.approx(two[1] + one[1])


def _record(epoch: int, epoch_s: float, **extra: float) -> dict[str, float]:
    record = {
        "epoch": epoch,
        "n": 1,
        "memory_mb": 1769,
        "epoch_s": epoch_s,
        "sync_s": 0.0,
        "load_s": 0.0,
        "compute_s": 0.1,
        "invocations": 1,
    }
    record.update(extra)
    return record


def _applied(calibration: Calibration, workload: Workload, catalog: Catalog) -> float:
    return dict(calibration.apply(workload, catalog).compute.points)[1769.0]


def test_a_crowded_epoch_is_taken_back_to_a_function_alone(workload: Workload) -> None:
    catalog = _bounded(1.0)
    alone, crowded = Calibration(), Calibration()
    first = _record(1, 2.0)
    alone.observe([[first, _record(2, 2.0)]], range(2, 3), workload, catalog)
    crowded.observe([[first, _record(2, 2.0, vcpu_demand=2.0)]], range(2, 3), workload, catalog)
    assert crowded.samples == alone.samples  # what was measured, kept as measured
    assert crowded.demands[1769] == [2.0]
    # Two vCPUs demanded of a machine that delivers one: the epoch ran twice as slow.
    assert _applied(crowded, workload, catalog) == pytest.approx(
        _applied(alone, workload, catalog) / 2.0
    )


def test_the_run_fits_what_the_machine_delivered(workload: Workload) -> None:
    # The probe said 1.9 vCPUs; the run's epochs say otherwise: alone (about one vCPU asked)
    # an epoch took 2 s, beside another (two asked) 3 s: the machine delivered 2 / 1.5.
    catalog = _bounded(1.9)
    calibration = Calibration()
    history = [_record(1, 9.0), _record(2, 2.0, vcpu_demand=1.0), _record(3, 3.0, vcpu_demand=2.0)]
    calibration.observe([history], range(1, 4), workload, catalog)
    assert calibration.delivered(catalog) == pytest.approx(2.0 / 1.5, rel=0.05)
    _, fitted = calibration.recalibrated(workload, catalog)
    assert fitted.platform.delivered_vcpus == calibration.delivered(catalog)
    again = Calibration.from_dict(calibration.to_dict())
    assert again.samples == calibration.samples and again.demands == calibration.demands
    # Epochs that all ran alike say nothing of it: the catalog's figure stands.
    same = Calibration()
    same.observe([[_record(1, 2.0), _record(2, 2.0)]], range(1, 3), workload, catalog)
    assert same.delivered(catalog) == 1.9
    # An older record's bare numbers read as epochs of unknown demand.
    assert Calibration.from_dict({"1769": [0.5]}).demands == {1769: [0.0]}


def _profile(delivered: float) -> JobProfile:
    return JobProfile(
        key="k",
        params=29,
        model_mb=0.0001,
        bytes_per_sample=2000.0,
        footprint_mb=100.0,
        compute_points=((256, 2e-4), (1728, 4e-5)),
        eval_points=((256, 0.0), (1728, 0.0)),
        checkpoint_s=0.001,
        cold_start_s=0.5,
        dispatch_s=0.002,
        train_samples=20_000,
        test_samples=0,
        configs=1,
        profiling_usd=0.0,
        profiling_s=1.0,
        delivered_vcpus=delivered,
        side_by_side_ratio=2.0 if delivered else 0.0,
    )


def test_planning_inputs_carry_what_the_machine_delivered(workload: Workload) -> None:
    catalog = _bounded(None)
    measured, plan_catalog = planning_inputs(_profile(0.5), workload, catalog)
    assert plan_catalog.platform.delivered_vcpus == 0.5
    unmeasured, plain = planning_inputs(_profile(0.0), workload, catalog)
    assert plain.platform.delivered_vcpus is None
    ours, theirs = dict(measured.compute.points), dict(unmeasured.compute.points)
    # At 256 MB (0.14 vCPU) the probe had what it asked for; at 1728 MB (0.98 vCPU) it got
    # 0.5 of it, so the function alone is twice as fast as it measured.
    assert ours[256.0] == pytest.approx(theirs[256.0])
    assert ours[1728.0] == pytest.approx(theirs[1728.0] * 0.5 / (1728 / 1769))


def test_what_a_probe_group_says_the_machine_delivered() -> None:
    catalog = _bounded(None)
    alone = {"compute_s_per_sample": 1e-3, "side_by_side_s_per_sample": 2e-3}
    other = {"side_by_side_s_per_sample": 2e-3}
    # Two functions of 0.9 vCPU computing at once ran twice as slow as one alone: 0.9 vCPUs.
    assert delivered_vcpus([alone, other], 0.9, catalog) == pytest.approx((0.9, 2.0))
    # No slower side by side: they got what they asked, 1.8 vCPUs (at most the machine's 2).
    quick = {**alone, "side_by_side_s_per_sample": 1e-3}
    assert delivered_vcpus([quick, {"side_by_side_s_per_sample": 1e-3}], 0.9, catalog) == (
        pytest.approx((1.8, 1.0))
    )
    assert delivered_vcpus([{"compute_s_per_sample": 1e-3}], 0.9, catalog) == (0.0, 0.0)


def test_cold_starts_side_by_side_are_taken_back_to_one_alone() -> None:
    catalog = _bounded(None)
    # Two starts at once demanding 2 vCPUs of a machine delivering 1: each took twice as long.
    assert cold_start_alone([(2.0, 2.0), (2.2, 2.0)], 1.0, catalog) == pytest.approx(1.05)
    assert cold_start_alone([(0.7, 0.3)], 1.0, catalog) == pytest.approx(0.7)  # alone
    assert cold_start_alone([], 1.0, catalog) == catalog.platform.cold_start_s


def test_a_solo_timing_slower_than_the_group_is_taken_again_and_the_faster_kept() -> None:
    group = [
        {"compute_s_per_sample": 3e-4, "side_by_side_s_per_sample": 2e-4},
        {"side_by_side_s_per_sample": 2.2e-4},
    ]
    assert solo_disturbed(group)
    assert not solo_disturbed([{**group[0], "compute_s_per_sample": 1.9e-4}, group[1]])
    assert not solo_disturbed([{"compute_s_per_sample": 3e-4}])  # no group: nothing to compare
    first = {"compute_s_per_sample": 3e-4, "eval_s_per_sample": 1e-4, "peak_rss_mb": 300.0}
    again = {"compute_s_per_sample": 2e-4, "eval_s_per_sample": 0.8e-4, "peak_rss_mb": 310.0}
    kept = faster_solo(first, again)
    assert kept["compute_s_per_sample"] == 2e-4 and kept["eval_s_per_sample"] == 0.8e-4
    assert kept["peak_rss_mb"] == 310.0
    slower = faster_solo(first, {**again, "compute_s_per_sample": 4e-4, "peak_rss_mb": 290.0})
    assert slower["compute_s_per_sample"] == 3e-4 and slower["peak_rss_mb"] == 300.0
