"""A run's first prediction holds what the run pays: a fresh function's set-up before its first
round (the job's imports, the model built) in the cold start the probe measures, and a training
run's epochs to its target (the offline estimate of a sample run), not ``max_epochs``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

import faasml
from faasml.catalog import load_catalog
from faasml.models.space import evaluate_allocation
from faasml.runtime.coordinator.estimates import SegmentEstimator
from faasml.runtime.platforms.contract import Billed, open_platform
from faasml.runtime.profile.calls import ProbeCalls, job_recipes
from faasml.runtime.profile.measure import (
    model_configs,
    platform_options_for,
    roomy_memory_mb,
)
from faasml.runtime.record.records import StageRecord
from faasml.runtime.runs.expected_epochs import from_curve
from faasml.runtime.runs.stage_pricing import stage_estimates
from faasml.types import Allocation
from faasml.workloads.build import build_model, load_data

from .prediction_loops import SETUP_S, curve_loop, slow_start_loop
from .table_workload import table_workload

SPACE = {"lr": {"loguniform": [0.05, 0.1]}}


def test_a_fresh_functions_set_up_is_part_of_the_cold_start_the_probe_measures(
    tmp_path: Path,
) -> None:
    """The loop's first call in a process waits SETUP_S before its first round: the probe's
    fresh function reports it, and the start it counts holds it (a run's fresh function pays
    it before its first epoch; before, the profile priced the process's start alone)."""
    job = faasml.Tuner(slow_start_loop, SPACE, budget=0.05, run_dir=tmp_path / "run").job
    catalog = load_catalog(job.catalog)
    train, test = load_data(job.dataset)
    model = build_model(job.model, train.input_shape, train.num_classes)
    recipes = job_recipes(job, model_configs(job), train)
    memory = roomy_memory_mb(catalog)
    options = platform_options_for(job, model, {})
    with open_platform(job.platform, catalog, **options) as platform:
        calls = ProbeCalls(
            job, catalog, platform, str(tmp_path), recipes, (train, test), measure_s=0.1
        )
        try:
            first = calls.call(memory, [calls.payload])[0]
            again = calls.call(memory, [calls.payload])[0]  # the same function, warm
        finally:
            calls.close()
    assert first["setup_s"] >= SETUP_S  # the wait is a lower bound, whatever the load
    assert "setup_s" not in again  # a warm function has set up already
    # The start it counts is taken to one vCPU: a function of fewer counts that share of it.
    spec = catalog.platform
    share = min(1.0, float(spec.vcpus(memory))) if spec.cold_start_scales_with_cpu else 1.0
    assert len(calls.colds) == 1 and calls.colds[0][0] >= SETUP_S * share


def test_a_training_run_prices_the_epochs_it_expects_to_its_target(tmp_path: Path) -> None:
    """The loop's loss is 2 / epoch: the sample run's curve says loss 0.26 by epoch 8, so the
    run plans and prices 8 epochs (max_epochs 30 only the cap) and stops there (before, the
    plan priced all 30)."""
    trainer = faasml.Trainer(
        curve_loop,
        {"lr": 0.05},
        deadline=3600,
        max_epochs=30,
        target_loss=0.26,
        settings={"batch_size": 16},
        run_dir=tmp_path / "run",
    )
    result = trainer.fit()
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    stage = record["plan"]["stages"][0]
    assert stage["epochs"] == 8 and result.epochs == 8
    assert record["target"]["reached"] is True
    events = [e["text"] for e in record["events"]]
    assert any("offline estimate: 8 epoch(s)" in e and "max_epochs 30" in e for e in events)
    assert stage["predicted_cost_usd"] >= 8 * stage["epoch_cost_usd"]  # and a start's


def test_the_offline_estimate_is_capped_and_falls_back_to_max_epochs() -> None:
    curve = [2.0 / e for e in range(1, 7)]
    assert from_curve(curve, 0.26, 0.1, 30).epochs == 8
    assert from_curve(curve, 0.26, 0.1, 5).epochs == 5  # the cap
    assert from_curve(curve, 0.4, 0.1, 30).epochs == 5  # the sample reached it
    flat = from_curve([1.0, 0.9, 0.85, 0.84, 0.84, 0.84], 0.01, 0.1, 12)
    assert flat.epochs == 12 and "no offline estimate" in flat.line
    assert from_curve([None, None], 0.1, 0.1, 7).epochs == 7


def test_survivors_not_known_yet_are_priced_as_drawn_from_the_trials_before() -> None:
    """Stage 2 keeps 2 of stage 1's 4 trials, two costing 1.5x their mean and two 0.5x, and
    runs them side by side: it lasts as long as the slower one kept. Of the six pairs, five
    hold a 1.5x trial (3 epochs of 0.5x more computation) and one two 0.5x trials (as much
    less): on average 4/6 of that more than the mean trial; its bill, the mean pair's, is
    the mean trial's (before, both were priced at the mean trial's)."""
    catalog, workload = load_catalog("aws-lambda"), table_workload()
    allocation = Allocation(1, 1024, "s3", "allreduce")
    stages = [
        StageRecord(1, 4, 1, allocation, 0.0, 0.0, 0.0, 0.0),
        StageRecord(2, 2, 3, allocation, 0.0, 0.0, 0.0, 0.0),
    ]
    compute_s = float(evaluate_allocation(workload, catalog, allocation).compute_s[0])
    mean = stage_estimates(workload, catalog, stages, factors={0: [1.0] * 4})[1]
    kept = stage_estimates(workload, catalog, stages, factors={0: [1.5, 1.5, 0.5, 0.5]})[1]
    assert kept[0] - mean[0] == pytest.approx((5 - 1) / 6 * 3 * 0.5 * compute_s)
    assert kept[1] == pytest.approx(mean[1])
    # Once the kept trials are known (a re-prediction), they are priced as they are.
    known = {0: [1.5, 1.5, 0.5, 0.5], 1: [0.5, 0.5]}
    assert stage_estimates(workload, catalog, stages, factors=known)[1][0] < mean[0]


def test_a_runs_measured_cold_start_holds_the_set_up_as_the_profile_does() -> None:
    """A tuning run re-calibrates its later stages' cold start from the starts it measured:
    with the set-up its fresh functions took before their first round (a worker's load),
    as the profile's cold start holds it (before, the process's start alone)."""
    platform = load_catalog("aws-lambda").platform
    estimator = SegmentEstimator(platform)
    estimator.observe_billed(Billed(3.0, 3584, cold=True, init_s=0.5, ok=True), 2.0)
    estimator.observe_billed(Billed(1.0, 3584, cold=False, init_s=0.0, ok=True), 0.01)
    share = min(1.0, float(platform.vcpus(3584)))
    assert estimator.cold_start_at_one_vcpu() == pytest.approx((0.5 + 2.0) * share)
