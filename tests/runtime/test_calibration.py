"""Live re-calibration (pure): measured epochs replace u(m) at the memory they ran on only; a
stage on the memory of the one before starts warm; the re-plan threshold."""

from __future__ import annotations

import dataclasses

import pytest

from faasml.catalog import Catalog, load_catalog
from faasml.models.calibration import REPLAN_DELTA, Calibration, moved, trial_factors
from faasml.models.cost import startup_cost
from faasml.models.space import evaluate_allocation
from faasml.runtime.record.records import StageRecord
from faasml.runtime.runs.stage_pricing import (
    EarlyStart,
    overlap_delay,
    partition_write_s,
    prewarmed,
    stage_estimate,
    stage_estimates,
    warm_after,
    warm_pool,
    wave_demand,
)
from faasml.types import Allocation
from faasml.workload import Workload, load_workload

from .table_workload import POINTS, table_workload


@pytest.fixture
def catalog() -> Catalog:
    return load_catalog("aws-lambda")


@pytest.fixture
def workload() -> Workload:
    return table_workload()


def _epoch(
    epoch: int, memory_mb: int, epoch_s: float, n: int = 1, **extra: float
) -> dict[str, float]:
    record = {
        "epoch": epoch,
        "n": n,
        "memory_mb": memory_mb,
        "epoch_s": epoch_s,
        "sync_s": 0.5,
        "load_s": 0.25,
        "compute_s": 0.1,
        "invocations": 1,
    }
    record.update(extra)
    return record


def _profiled(workload: Workload, catalog: Catalog, memory_mb: float) -> float:
    vcpus = catalog.platform.vcpus([memory_mb])
    return float(workload.compute.seconds_per_mb(vcpus, [memory_mb])[0])


def test_observe_leaves_out_the_first_epoch_on_an_allocation_when_later_ones_ran(
    workload: Workload, catalog: Catalog
) -> None:
    calibration = Calibration()
    history = [_epoch(1, 1024, 30.0, n=2), _epoch(2, 1024, 4.75, n=2), _epoch(3, 1024, 5.75, n=2)]
    calibration.observe([history], range(1, 4), workload, catalog)
    warm = catalog.platform.warm_start_s
    partition_mb = workload.dataset_mb / 2
    assert calibration.samples == {
        1024: [
            pytest.approx((4.75 - 0.75 - warm) / partition_mb),
            pytest.approx((5.75 - 0.75 - warm) / partition_mb),
        ]
    }


def test_observe_takes_a_lone_first_epoch_less_the_cold_start(
    workload: Workload, catalog: Catalog
) -> None:
    calibration = Calibration()
    calibration.observe([[_epoch(1, 1024, 9.0)]], range(1, 2), workload, catalog)
    cold = float(catalog.platform.cold_start_time(1024))
    warm = catalog.platform.warm_start_s
    assert cold > 0
    assert calibration.samples[1024] == [
        pytest.approx((9.0 - 0.75 - warm - cold) / workload.dataset_mb)
    ]
    # One whose synchronisation, loading and cold start cover it all still counts its compute.
    calibration.observe([[_epoch(1, 512, 0.6, n=4, compute_s=0.3)]], range(1, 2), workload, catalog)
    assert calibration.samples[512] == [pytest.approx(0.3 / (workload.dataset_mb / 4))]


def test_an_epoch_of_several_functions_counts_worker_0s_whole_evaluation(
    workload: Workload, catalog: Catalog
) -> None:
    # Half of one function's u(m) is evaluation: at n = 2 worker 0 evaluates it all, so the
    # epoch computed (D/2)·u·(1/2 + 2/2) and u is that over 1.5 partitions' worth.
    evaluating = dataclasses.replace(workload, evaluation_share=0.5)
    history = [_epoch(1, 1024, 30.0, n=2), _epoch(2, 1024, 4.75, n=2)]
    plain, halved = Calibration(), Calibration()
    plain.observe([history], range(1, 3), workload, catalog)
    halved.observe([history], range(1, 3), evaluating, catalog)
    assert halved.samples[1024] == [pytest.approx(plain.samples[1024][0] / 1.5)]


def test_observe_reads_only_the_epochs_asked_for(workload: Workload, catalog: Catalog) -> None:
    history = [_epoch(1, 1024, 30.0), _epoch(2, 1024, 6.75), _epoch(3, 2048, 20.0)]
    calibration = Calibration()
    calibration.observe([history], range(2, 3), workload, catalog)
    # Epoch 2 is not the trial's first on 1024 MB (epoch 1 was): warm, no cold start taken off.
    warm = catalog.platform.warm_start_s
    assert calibration.samples == {1024: [pytest.approx((6.75 - 0.75 - warm) / 40.0)]}

    # Each trial's history is read on its own: a second trial's first epoch there is cold.
    other = [_epoch(2, 1024, 6.75)]
    again = Calibration()
    again.observe([history, other], range(2, 3), workload, catalog)
    assert len(again.samples[1024]) == 2
    assert again.samples[1024][1] < again.samples[1024][0]


def test_trial_factors_are_each_trials_computation_over_theirs_together(
    workload: Workload, catalog: Catalog
) -> None:
    # Epoch 1 of each is its first on 1024 MB (left out); after it, the wide trial's epochs
    # compute for 4.0 s and the narrow one's for 2.0 s (each less 0.75 s of sync and loading).
    warm = catalog.platform.warm_start_s
    wide = [_epoch(e, 1024, 4.75 + warm) for e in (1, 2, 3)]
    narrow = [_epoch(e, 1024, 2.75 + warm) for e in (1, 2, 3)]
    # Together their median u is the mean of 4 and 2: the wide one costs 4/3 of it.
    factors = trial_factors([wide, narrow], range(1, 4), workload, catalog)
    assert factors == [pytest.approx(4 / 3), pytest.approx(2 / 3)]
    # One trial alone, or trials alike, cost what they cost together.
    assert trial_factors([wide], range(1, 4), workload, catalog) == [pytest.approx(1.0)]
    assert trial_factors([wide, wide], range(1, 4), workload, catalog) == [1.0, 1.0]
    # A trial with no epoch on a size the others ran on is priced at their mean.
    other = [_epoch(e, 2048, 9.0) for e in (1, 2)]
    assert trial_factors([wide, other], range(1, 3), workload, catalog) == [
        pytest.approx(1.0),
        pytest.approx(1.0),
    ]


def test_a_stage_lasts_as_long_as_its_slowest_trial(workload: Workload, catalog: Catalog) -> None:
    allocation = Allocation(1, 1024, "s3")
    table = evaluate_allocation(workload, catalog, allocation)
    epoch_s, compute_s = float(table.time_s[0]), float(table.compute_s[0])
    even = stage_estimate(workload, catalog, allocation, 2, 3)
    # Factors all 1: the same as none.
    assert stage_estimate(workload, catalog, allocation, 2, 3, factors=[1.0, 1.0]) == even
    # Two trials side by side, one computing 1.5x the mean, the other 0.5x: the stage takes
    # the slower one's three epochs; the bill is the two trials' together, as before.
    uneven = stage_estimate(workload, catalog, allocation, 2, 3, factors=[1.5, 0.5])
    assert uneven[0] == pytest.approx(even[0] + 3 * 0.5 * compute_s)
    assert uneven[1] == pytest.approx(even[1])
    assert epoch_s > compute_s > 0
    # Four trials, two at a time, each taking the first functions freed: the fast first one
    # frees its function for the third (fast) one, after which the fourth (slow) one starts;
    # it ends at 0.5 + 0.5 + 1.5 of the trials' mean, where equal trials end at 2 of it.
    catalog_two = dataclasses.replace(
        catalog, platform=dataclasses.replace(catalog.platform, concurrency_limit=2)
    )
    four = stage_estimate(workload, catalog_two, allocation, 4, 3)
    mixed = stage_estimate(workload, catalog_two, allocation, 4, 3, factors=[0.5, 1.5, 0.5, 1.5])

    def trial(f: float) -> float:
        return 3 * (epoch_s + (f - 1.0) * compute_s)

    assert mixed[0] - four[0] == pytest.approx(2 * trial(0.5) + trial(1.5) - 2 * trial(1.0))
    assert mixed[1] == pytest.approx(four[1])
    # Alternating, they balance: no longer than equal trials.
    balanced = stage_estimate(workload, catalog_two, allocation, 4, 3, factors=[1.2, 0.8, 1.2, 0.8])
    assert balanced == pytest.approx(four)


def test_apply_takes_the_measured_u_and_scales_the_rest_by_the_same_ratio(
    workload: Workload, catalog: Catalog
) -> None:
    profiled = _profiled(workload, catalog, 1024)
    assert profiled == pytest.approx(0.2)
    calibration = Calibration({1024: [0.5, 0.4, 0.45]})  # median 0.45: 2.25 × the profile
    calibrated = calibration.apply(workload, catalog)
    points = dict(calibrated.compute.points)
    assert calibrated.compute.kind == "table"
    assert sorted(points) == [m for m, _ in POINTS]
    assert points[1024.0] == pytest.approx(0.45)
    assert points[128.0] == pytest.approx(0.9 * 2.25)
    assert points[3538.0] == pytest.approx(0.1 * 2.25)
    # Nothing but u(m) moves, and the workload the calibration read is left alone.
    assert dataclasses.replace(calibrated, compute=workload.compute) == workload
    assert workload.compute.points == POINTS


def test_apply_adds_a_point_at_a_memory_the_profile_did_not_measure(
    workload: Workload, catalog: Catalog
) -> None:
    profiled = _profiled(workload, catalog, 512)  # interpolated between 128 and 1024 MB
    points = dict(Calibration({512: [profiled]}).apply(workload, catalog).compute.points)
    assert sorted(points) == [128.0, 512.0, 1024.0, 3538.0]
    assert points[512.0] == pytest.approx(profiled)
    for memory, u in POINTS:  # ratio 1: the profile's own values elsewhere
        assert points[memory] == pytest.approx(u)


def test_apply_keeps_u_non_increasing_in_memory(workload: Workload, catalog: Catalog) -> None:
    # 1024 MB measured as profiled, 3538 MB three times slower: median ratio 2.
    calibrated = Calibration({1024: [0.2], 3538: [0.3]}).apply(workload, catalog)
    points = dict(calibrated.compute.points)
    assert points[128.0] == pytest.approx(0.9 * 2)
    assert points[3538.0] == pytest.approx(0.3)
    assert points[1024.0] == pytest.approx(0.3)  # raised to the larger size's measurement
    values = [u for _, u in sorted(points.items())]
    assert values == sorted(values, reverse=True)
    memories = [128.0, 512.0, 1024.0, 2048.0, 3538.0]
    u = calibrated.compute.seconds_per_mb(catalog.platform.vcpus(memories), memories)
    assert list(u) == sorted(u, reverse=True)


def test_apply_without_observations_returns_the_workload_unchanged(
    workload: Workload, catalog: Catalog
) -> None:
    assert Calibration().apply(workload, catalog) is workload


def test_apply_on_an_analytical_profile(catalog: Catalog) -> None:
    amdahl = load_workload("lr-higgs")
    assert amdahl.compute.kind != "table"
    twice = 2 * _profiled(amdahl, catalog, 1024)
    points = dict(Calibration({1024: [twice]}).apply(amdahl, catalog).compute.points)
    assert points[1024.0] == pytest.approx(twice)
    others = [m for m in points if m != 1024.0]
    assert len(others) >= 3
    for memory in others:  # the analytical profile's own value, twice, everywhere else
        analytical = amdahl.compute.seconds_per_mb([memory / 1769.0], [memory])[0]
        assert points[memory] == pytest.approx(2 * float(analytical))


def test_calibration_round_trips_through_the_record(workload: Workload, catalog: Catalog) -> None:
    calibration = Calibration()
    history = [_epoch(1, 1024, 4.0), _epoch(2, 512, 3.0)]
    calibration.observe([history], range(1, 3), workload, catalog)
    again = Calibration.from_dict(calibration.to_dict())
    assert again.samples == calibration.samples
    assert list(calibration.to_dict()) == ["512", "1024"]


def _stage(trials: int, memory_mb: int, n: int = 1, epochs: int = 1) -> StageRecord:
    allocation = Allocation(n=n, memory_mb=memory_mb, storage="s3", scheme="allreduce")
    return StageRecord(0, trials, epochs, allocation, 0.0, 0.0, 0.0, 0.0)


def test_a_stage_on_the_memory_of_the_one_before_pays_no_cold_start(
    workload: Workload, catalog: Catalog
) -> None:
    first, same, other = _stage(8, 1024), _stage(4, 1024), _stage(4, 2048)
    cold_same = stage_estimate(workload, catalog, same.allocation, 4, 1)  # type: ignore[arg-type]
    cold_other = stage_estimate(workload, catalog, other.allocation, 4, 1)  # type: ignore[arg-type]
    lone_first = stage_estimate(workload, catalog, first.allocation, 8, 1)  # type: ignore[arg-type]

    (t1, c1), (t2, c2) = stage_estimates(workload, catalog, [first, same])
    # The first stage starts cold, once its partitions are written (time, not bill).
    write = partition_write_s(workload, catalog, 1)
    assert write > 0
    assert (t1, c1) == pytest.approx((lone_first[0] + write, lone_first[1]))
    assert t2 < cold_same[0] and c2 < cold_same[1]  # the second starts on warm functions
    warm = warm_after(catalog, workload, first.allocation, 8)  # type: ignore[arg-type]
    assert warm >= 4
    assert (t2, c2) == pytest.approx(
        stage_estimate(workload, catalog, same.allocation, 4, 1, warm)  # type: ignore[arg-type]
    )

    # On another memory size the next stage's functions start during the last wave of the
    # one before (prewarmed): billed as they are alone, waited for only where not hidden.
    t3, c3 = stage_estimates(workload, catalog, [first, other])[1]
    pool = warm_pool(workload, catalog, [first])
    early = prewarmed(workload, catalog, first, other, pool)
    assert early[0] == 4 and c3 == pytest.approx(cold_other[1]) and t3 < cold_other[0]
    other_allocation = other.allocation
    assert (t3, c3) == pytest.approx(
        stage_estimate(workload, catalog, other_allocation, 4, 1, 0, early)
    )
    # Where warm functions keep their partition, the first invocation reads it after the
    # start: however long the wave before, that read is waited for.
    keeping = dataclasses.replace(
        catalog, platform=dataclasses.replace(catalog.platform, keeps_partition=True)
    )
    cold = stage_estimate(workload, keeping, other_allocation, 4, 1)
    hours = stage_estimate(workload, keeping, other_allocation, 4, 1, 0, EarlyStart(4, 3600.0))
    table = evaluate_allocation(workload, keeping, other_allocation)
    start = float(keeping.platform.cold_start_time(2048))
    first = keeping.platform.contention(wave_demand(keeping, other_allocation, 4))
    read = (float(table.startup_s[0]) - start) * first
    assert read > 0 and hours[0] == pytest.approx(cold[0] - start * first)


def test_warm_functions_read_the_partitions_of_a_new_function_count_once_written(
    workload: Workload,
) -> None:
    # Two trials on one function each leave two warm; one trial on two functions then
    # starts on them, but its partitions (halves) must first be written and then read.
    bounded = _bounded(2.0)  # faasml's runtime: warm workers keep their partition
    local = dataclasses.replace(
        bounded, platform=dataclasses.replace(bounded.platform, keeps_partition=True)
    )
    pair, wide = _local_stage(2, 1536), _local_stage(1, 1536, n=2)
    (_, _), (t_wide, c_wide), (t_again, c_again) = stage_estimates(
        workload, local, [pair, wide, wide]
    )
    allocation = wide.allocation
    warm = stage_estimate(workload, local, allocation, 1, 1, warm=2)
    table = evaluate_allocation(workload, local, allocation)
    first = local.platform.contention(wave_demand(local, allocation, 1))
    read = (float(table.startup_s[0]) - float(local.platform.cold_start_time(1536))) * first
    assert read > 0
    assert t_wide == pytest.approx(warm[0] + read + partition_write_s(workload, local, 2))
    assert c_wide > warm[1]  # the functions read while billed
    # The next stage on the same count finds them written and read.
    assert (t_again, c_again) == pytest.approx(warm)
    # A write measured by the run prices the next count's partitions at its rate.
    assert partition_write_s(workload, local, 2, write_mbps=1.0) == pytest.approx(
        workload.dataset_mb + 2 * local.storage(local.platform.data_store).latency_s
    )


def test_warm_functions_that_do_not_cover_the_first_wave_leave_the_cold_start(
    workload: Workload, catalog: Catalog
) -> None:
    # One trial on one function leaves one warm; four trials on two functions each need 8.
    small, wide = _stage(1, 1024), _stage(4, 1024, n=2)
    allocation = wide.allocation
    alone = stage_estimate(workload, catalog, allocation, 4, 1)
    assert stage_estimate(workload, catalog, allocation, 4, 1, warm=1) == pytest.approx(alone)
    # After the small stage the 7 more start during it (prewarmed): billed as alone.
    assert stage_estimates(workload, catalog, [small, wide])[1][1] == pytest.approx(alone[1])


def _bounded(vcpus: float) -> Catalog:
    """The local catalog on a machine of ``vcpus`` vCPUs (its memory unbounded)."""
    local = load_catalog("local")
    platform = dataclasses.replace(
        local.platform, capacity_vcpus=vcpus, capacity_memory_mb=None, concurrency_limit=64
    )
    return dataclasses.replace(local, platform=platform)


def _local_stage(trials: int, memory_mb: int, n: int = 1) -> StageRecord:
    allocation = Allocation(n=n, memory_mb=memory_mb, storage="embedded", scheme="allreduce")
    return StageRecord(0, trials, 1, allocation, 0.0, 0.0, 0.0, 0.0)


def test_a_bounded_machine_stops_idle_functions_of_other_sizes_least_recent_first(
    workload: Workload,
) -> None:
    catalog = _bounded(2.0)  # 1728 MB is 0.977 vCPU, 1792 MB 1.013, 640 MB 0.362
    # The probe left two of 1728 MB idle, then one of 640 MB (used last).
    probe = {1728: 2, 640: 1}
    after = warm_pool(workload, catalog, [_local_stage(8, 1792)], probe)
    # One 1792 MB function at a time (2 / 1.013): beside it 0.99 vCPU, so the 1728s (idle
    # longest) are stopped first, both of them; the 640 MB one stays.
    assert after == {640: 1, 1792: 1}
    assert list(after) == [640, 1792]  # the stage's functions are now the most recent
    # A stage on 1728 MB after it found no function of its size warm, as the run did: its
    # one starts during the last 1792 MB trial (0.977 + 1.013 vCPUs fit in 2), billed whole.
    stages = [_local_stage(8, 1792), _local_stage(1, 1728)]
    cold = stage_estimate(workload, catalog, Allocation(1, 1728, "embedded"), 1, 1)
    early = prewarmed(workload, catalog, stages[0], stages[1], after)
    assert early[0] == 1
    time_s, cost = stage_estimates(workload, catalog, stages, probe)[1]
    assert cost == pytest.approx(cold[1]) and time_s < cold[0]
    # On 1.9 vCPUs it does not fit beside that trial: it starts cold.
    tight = _bounded(1.9)
    alone = stage_estimate(workload, tight, Allocation(1, 1728, "embedded"), 1, 1)
    assert stage_estimates(workload, tight, stages, probe)[1] == pytest.approx(alone)
    # Had the 640 MB one been idle longest, it would have gone first and a 1728 stayed.
    assert warm_pool(workload, catalog, [_local_stage(8, 1792)], {640: 1, 1728: 2}) == {
        1728: 1,
        1792: 1,
    }


def test_functions_started_beside_a_wave_the_machine_cannot_feed_slow_it(
    workload: Workload,
) -> None:
    # The machine delivers 1 vCPU: the last 1792 MB trial (1.013 vCPU) and the 1728 MB
    # function starting beside it (0.977) share it, so both run slower while they overlap.
    fed = _bounded(2.0)
    starved = dataclasses.replace(
        fed, platform=dataclasses.replace(fed.platform, delivered_vcpus=1.0)
    )
    stages = [_local_stage(3, 1792), _local_stage(1, 1728)]
    big, small = Allocation(1, 1792, "embedded"), Allocation(1, 1728, "embedded")
    platform = starved.platform
    alone = platform.contention(wave_demand(starved, big, 1))
    both = platform.contention(wave_demand(starved, big, 1) + float(platform.vcpus(1728)))
    assert both > alone > 1.0

    early = prewarmed(workload, starved, stages[0], stages[1], {})
    assert early.functions == 1 and early.contention == pytest.approx(both)
    delay_s, delay_usd = overlap_delay(workload, starved, stages[0], stages[1], early)
    # The overlap lasts the start, or the wave lengthened by the delay itself (L / r).
    overlap = min(float(platform.cold_start_time(1728)) * both, early.hidden_s * both / alone)
    assert delay_s == pytest.approx(overlap * (1 - alone / both)) and delay_s > 0
    table = evaluate_allocation(workload, starved, big)
    assert delay_usd == pytest.approx(delay_s * float(table.function_usd[0] / table.time_s[0]))

    (t0, c0), (t1, c1) = stage_estimates(workload, starved, stages)
    lone = stage_estimate(workload, starved, big, 3, 1)
    write = partition_write_s(workload, starved, 1)  # before the first stage on one function
    assert (t0, c0) == pytest.approx((lone[0] + delay_s + write, lone[1] + delay_usd))
    # The early start is billed as long as it ran beside the wave, not as alone, and hidden
    # behind the wave as the delay lengthened it.
    longer = early._replace(hidden_s=early.hidden_s + delay_s)
    assert t1 == pytest.approx(stage_estimate(workload, starved, small, 1, 1, 0, longer)[0])
    cold = stage_estimate(workload, starved, small, 1, 1)
    start_usd = float(startup_cost(platform, 1, 1728))
    first = platform.contention(wave_demand(starved, small, 1))
    assert c1 == pytest.approx(cold[1] + start_usd * (both - first)) and c1 > cold[1]

    # Where the machine delivers what both demand, the wave is not slowed.
    fed_early = prewarmed(workload, fed, stages[0], stages[1], {})
    assert fed_early.functions == 1
    assert overlap_delay(workload, fed, stages[0], stages[1], fed_early) == (0.0, 0.0)
    fed_lone = stage_estimate(workload, fed, big, 3, 1)
    assert stage_estimates(workload, fed, stages)[0] == pytest.approx(
        (fed_lone[0] + partition_write_s(workload, fed, 1), fed_lone[1])
    )


def test_an_unbounded_platform_keeps_every_idle_function(workload: Workload) -> None:
    catalog = load_catalog("aws-lambda")
    stage = _stage(8, 1024)
    after = warm_pool(workload, catalog, [stage], {1728: 2, 640: 1})
    assert after[1728] == 2 and after[640] == 1 and after[1024] >= 1


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ((100.0, 1.0), False),
        ((110.0, 1.0), False),  # exactly δ: not more than δ
        ((90.0, 1.05), False),
        ((110.5, 1.0), True),
        ((89.0, 1.0), True),
        ((100.0, 1.11), True),  # the cost alone moved
        ((100.0, 0.85), True),
    ],
)
def test_moved_is_more_than_delta_of_time_or_cost(
    after: tuple[float, float], expected: bool
) -> None:
    assert REPLAN_DELTA == 0.1
    assert moved((100.0, 1.0), after, REPLAN_DELTA) is expected


def test_moved_from_nothing_is_any_change() -> None:
    assert moved((0.0, 0.0), (0.0, 0.0), 0.1) is False
    assert moved((0.0, 0.0), (1e-6, 0.0), 0.1) is True
    assert moved((10.0, 1.0), (14.0, 1.0), 0.5) is False
    assert moved((10.0, 1.0), (16.0, 1.0), 0.5) is True
