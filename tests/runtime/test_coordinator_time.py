"""What a real run pays per invocation and per function, priced as it pays it: the
coordinator's time between a trial's invocations (committing the record, launching the next,
noticing an end) in every invocation round's time and never billed, measured by a real run
before it plans and again as it runs; the data partition read once per function, at its
start, where warm functions keep it (faasml's workers do), not at every invocation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from faasml.catalog import Catalog, load_catalog
from faasml.job import from_mapping
from faasml.models.space import evaluate_allocation
from faasml.runtime.coordinator.estimates import coordinator_seconds
from faasml.runtime.profile.measure import JobProfile, planning_inputs
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.stage_pricing import stage_estimate
from faasml.runtime.runs.tune import TuneRun
from faasml.types import Allocation, Constraint
from faasml.workload import Workload

from .table_workload import table_workload
from .tiny_jobs import four_trial_tune_job


def _with_coordinator(catalog: Catalog, seconds: float) -> Catalog:
    platform = dataclasses.replace(catalog.platform, coordinator_s=seconds)
    return dataclasses.replace(catalog, platform=platform)


@pytest.fixture
def workload() -> Workload:
    return dataclasses.replace(table_workload(), batch_size=100)


@pytest.mark.parametrize("catalog_name", ["aws-lambda", "local"])
@pytest.mark.parametrize("n", [1, 3])
def test_each_invocation_takes_the_coordinators_time_and_bills_none_of_it(
    workload: Workload, catalog_name: str, n: int
) -> None:
    catalog = load_catalog(catalog_name)
    storage, scheme = catalog.sync_options()[0]
    allocation = Allocation(n, 1024, storage, scheme)
    plain = evaluate_allocation(workload, catalog, allocation)
    timed = evaluate_allocation(workload, _with_coordinator(catalog, 0.04), allocation)
    assert len(plain) == 1
    invocations = float(plain.invoke_s[0]) / catalog.platform.warm_start_s
    assert float(timed.time_s[0]) == pytest.approx(float(plain.time_s[0]) + 0.04 * invocations)
    assert float(timed.function_usd[0]) == pytest.approx(float(plain.function_usd[0]), rel=1e-12)
    assert float(timed.cost_usd[0]) == pytest.approx(float(plain.cost_usd[0]), rel=1e-12)


def test_a_stage_pays_the_coordinators_time_once_per_epoch_of_each_wave(
    workload: Workload,
) -> None:
    catalog = load_catalog("aws-lambda")  # unbounded: no contention, one wave of 6 trials
    allocation = Allocation(1, 1024, catalog.platform.data_store)
    time0, cost0 = stage_estimate(workload, catalog, allocation, trials=6, epochs=3)
    time1, cost1 = stage_estimate(
        workload, _with_coordinator(catalog, 0.05), allocation, trials=6, epochs=3
    )
    assert time1 - time0 == pytest.approx(3 * 0.05)
    assert cost1 == pytest.approx(cost0, rel=1e-12)


def _keeping(catalog: Catalog) -> Catalog:
    platform = dataclasses.replace(catalog.platform, keeps_partition=True)
    return dataclasses.replace(catalog, platform=platform)


@pytest.mark.parametrize("n", [1, 2])
def test_a_kept_partition_is_read_at_the_start_not_every_epoch(workload: Workload, n: int) -> None:
    catalog = load_catalog("local")
    storage, scheme = catalog.sync_options()[0]
    allocation = Allocation(n, 1024, storage, scheme)
    plain = evaluate_allocation(workload, catalog, allocation)
    kept = evaluate_allocation(workload, _keeping(catalog), allocation)
    read = float(plain.load_s[0])  # one read of the partition (one invocation per epoch)
    assert read > 0 and float(kept.load_s[0]) == 0.0
    assert float(kept.time_s[0]) == pytest.approx(float(plain.time_s[0]) - read)
    assert float(kept.startup_s[0]) == pytest.approx(float(plain.startup_s[0]) + read)
    per_gb_s = catalog.platform.price_per_gb_s
    billed = n * read * 1024 / 1024.0 * per_gb_s  # read inside the first invocation: billed
    assert float(kept.startup_usd[0]) == pytest.approx(float(plain.startup_usd[0]) + billed)
    assert float(kept.function_usd[0]) == pytest.approx(float(plain.function_usd[0]) - billed)


def test_a_stage_reads_kept_partitions_once_and_not_at_all_on_warm_functions(
    workload: Workload,
) -> None:
    catalog = load_catalog("aws-lambda")
    kept = _keeping(catalog)
    allocation = Allocation(1, 1024, catalog.platform.data_store)
    read = float(evaluate_allocation(workload, catalog, allocation).load_s[0])
    time0, _ = stage_estimate(workload, catalog, allocation, trials=4, epochs=5)
    time1, _ = stage_estimate(workload, kept, allocation, trials=4, epochs=5)
    assert time1 == pytest.approx(time0 - 5 * read + read)  # one wave of 4: read once
    warm0, _ = stage_estimate(workload, catalog, allocation, trials=4, epochs=5, warm=4)
    warm1, _ = stage_estimate(workload, kept, allocation, trials=4, epochs=5, warm=4)
    assert warm1 == pytest.approx(warm0 - 5 * read)


def test_coordinator_seconds_is_a_median_commit_and_launch_and_half_a_poll() -> None:
    commits = [0.02, 0.5, 0.01]  # one slow commit does not move the median
    launches = [0.004, 0.9, 0.006, 0.005]  # nor a launch that started processes
    assert coordinator_seconds(commits, launches, 0.004) == pytest.approx(0.02 + 0.0055 + 0.002)
    assert coordinator_seconds([0.01], [], 0.0) == pytest.approx(0.01)  # before any segment
    assert coordinator_seconds([], [], 0.01) == pytest.approx(0.005)
    assert coordinator_seconds([-1.0], [-1.0], 0.0) == 0.0


def test_planning_inputs_put_the_measured_coordinator_time_in_the_catalog(
    workload: Workload,
) -> None:
    catalog = load_catalog("local")
    profile = JobProfile(
        key="k",
        params=10,
        model_mb=0.001,
        bytes_per_sample=100.0,
        footprint_mb=200.0,
        compute_points=((512, 1e-4), (1728, 5e-5)),
        eval_points=((512, 1e-5), (1728, 5e-6)),
        checkpoint_s=0.002,
        cold_start_s=1.0,
        dispatch_s=0.001,
        train_samples=1000,
        test_samples=250,
        configs=1,
        profiling_usd=0.0,
        profiling_s=1.0,
    )
    _, plain = planning_inputs(profile, workload, catalog)
    _, timed = planning_inputs(profile, workload, catalog, coordinator_s=0.025)
    assert plain.platform.coordinator_s == 0.0
    assert timed.platform.coordinator_s == 0.025
    assert timed.platform.keeps_partition and not catalog.platform.keeps_partition
    assert timed.platform.warm_start_s == pytest.approx(0.003)  # dispatch + checkpoint


def test_a_run_measures_its_coordinator_and_recalibrates_from_the_kept_trials(
    tmp_path: Path,
) -> None:
    job = from_mapping({**four_trial_tune_job("coordinator-time", 1), "platform": "local"})
    run = TuneRun(job, Constraint(deadline_s=600.0), tmp_path / "run")
    run.plan()
    poll = run.options.poll_s
    first = run.plan_catalog.platform.coordinator_s
    assert first > poll / 2  # one write of the run's record, and half a poll
    assert run.record.coordinator_s == first
    state = record_to_json(run.execute())
    assert state["status"] == "finished"
    measured = run.plan_catalog.platform.coordinator_s  # re-calibrated after stage 1
    assert measured > poll / 2
    assert state["coordinator_s"] == measured
    assert "repredicted_time_s" in state["plan"]["stages"][1]
    # Re-calibrated after stage 1 from the 2 trials kept (one epoch each), not all 4: the
    # rest of the run trains those (a search over model sizes keeps the slower, wider ones).
    kept = [t for t in state["trials"] if t["status"] != "pruned"]
    assert len(kept) == 2
    samples = sum(len(v) for v in state["calibration"].values())
    assert samples == 2
