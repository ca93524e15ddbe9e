"""Measured job profiles: a probe of the job itself on the local platform (real processes),
cached by a key of what changes it, billed as 'profiling', and the floor every plan respects."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.catalog import Catalog, load_catalog
from faasml.job import JobSpec, load_job
from faasml.models.config_cost import config_text, mean_factor
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.platforms.contract import open_platform
from faasml.runtime.profile.measure import (
    MEMORY_MARGIN,
    JobProfile,
    cache_dir,
    measure_job,
    planning_inputs,
    platform_options_for,
    profile_key,
    roomy_memory_mb,
)
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TrainRun, TuneRun, resume_run
from faasml.types import Constraint
from faasml.workload import load_workload
from faasml.workloads.build import build_model, load_data

LOGREG: dict[str, Any] = {
    "name": "profile-logreg",
    "model": "logistic-regression",
    "dataset": {"synthetic": "higgs-like", "samples": 2000, "features": 28, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9},
    "search_space": {
        "optimizer.lr": {"loguniform": [0.001, 1.0]},
        "optimizer.momentum": {"uniform": [0.0, 0.95]},
    },
    "tuning": {"trials": 4, "reduction_factor": 2, "epochs_per_stage": 1, "metric": "loss"},
    "batch_size": 128,
    "seed": 0,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
    "profile": "lr-higgs",
}

CNN: dict[str, Any] = {
    "name": "profile-cnn",
    "model": {"name": "mobilenet-small", "width": 8, "blocks": 2},
    "dataset": {"synthetic": "images", "samples": 300, "classes": 4, "test_fraction": 0.2},
    "optimizer": {"name": "adam", "lr": 0.003},
    "search_space": {
        "optimizer.lr": {"loguniform": [0.0003, 0.03]},
        "model.width": {"choice": [4, 8]},
    },
    "tuning": {"trials": 4, "reduction_factor": 2, "epochs_per_stage": 1, "metric": "accuracy"},
    "batch_size": 32,
    "seed": 0,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
    "profile": "mobilenet-cifar10",
}


def _write(folder: Path, spec: dict[str, Any], name: str = "job.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def _options(job: JobSpec) -> dict[str, Any]:
    train, _ = load_data(job.dataset)
    return platform_options_for(
        job, build_model(job.model, train.input_shape, train.num_classes), {}
    )


@dataclasses.dataclass
class Measured:
    job: JobSpec
    options: dict[str, Any]
    profile: JobProfile
    meter: Meter
    cold_starts: int


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of this module's own, so that 'measured' and 'cached' mean what they say."""
    folder = tmp_path_factory.mktemp("profile-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAASML_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog("local")


def _measure(folder: Path, spec: dict[str, Any], catalog: Catalog) -> Measured:
    job = load_job(_write(folder, spec))
    options = _options(job)
    platform = open_platform(job.platform, catalog, **options)
    meter = Meter(catalog)
    try:
        profile = measure_job(job, catalog, platform, meter=meter, platform_options=options)
        cold_starts = platform.cold_starts
    finally:
        platform.close()
    return Measured(job, options, profile, meter, cold_starts)


@pytest.fixture(scope="module")
def logreg(cache: Path, tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> Measured:
    return _measure(tmp_path_factory.mktemp("logreg"), LOGREG, catalog)


@pytest.fixture(scope="module")
def cnn(cache: Path, tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> Measured:
    pytest.importorskip("torch")
    return _measure(tmp_path_factory.mktemp("cnn"), CNN, catalog)


def test_a_first_measurement_runs_the_probe_and_keeps_the_profile(
    logreg: Measured, cache: Path
) -> None:
    profile = logreg.profile
    assert not profile.cached and logreg.cold_starts >= 2
    assert profile.key == profile_key(logreg.job, logreg.meter.catalog, logreg.options)
    assert cache_dir() == cache / "profiles"
    kept = json.loads((cache / "profiles" / f"{profile.key}.json").read_text())
    assert JobProfile.from_dict(kept) == profile
    assert profile.train_samples == 1600 and profile.test_samples == 400
    assert profile.params == 29 and profile.configs == 1  # no model.* in the search space
    assert profile.cold_start_s > 0 and profile.dispatch_s > 0 and profile.checkpoint_s > 0


@pytest.mark.parametrize("name", ["logreg", "cnn"])
def test_footprint_and_compute_points(name: str, request: pytest.FixtureRequest) -> None:
    measured: Measured = request.getfixturevalue(name)
    profile, catalog = measured.profile, measured.meter.catalog
    assert profile.footprint_mb > 20  # at least an interpreter with numpy
    assert profile.memory_floor_mb() == pytest.approx(profile.footprint_mb * (1 + MEMORY_MARGIN))
    memories = [m for m, _ in profile.compute_points]
    assert len(memories) >= 2
    assert memories == sorted(set(memories))  # sorted, one point per memory size
    assert all(seconds > 0 for _, seconds in profile.compute_points)
    assert [m for m, _ in profile.eval_points] == memories
    assert all(seconds > 0 for _, seconds in profile.eval_points)
    step = catalog.platform.memory_step_mb
    assert all(m % step == 0 for m in memories)
    assert memories[-1] == roomy_memory_mb(catalog)  # where the footprint was measured
    assert memories[0] >= profile.memory_floor_mb()  # the least that holds it


def test_the_probe_times_each_configuration_and_a_tune_run_prices_its_trials(
    logreg: Measured, cnn: Measured, tmp_path: Path
) -> None:
    assert logreg.profile.config_costs == ()  # no model.* key: every trial costs the same
    costs = dict(cnn.profile.config_costs)
    assert set(costs) == {config_text({"model.width": 4}), config_text({"model.width": 8})}
    assert sum(costs.values()) / len(costs) == pytest.approx(1.0)
    low, high = min(costs.values()), max(costs.values())
    assert f"its 2 model configurations cost {low:.2f}-{high:.2f}x" in cnn.profile.summary()
    assert "model configurations" not in logreg.profile.summary()
    assert all(cost > 0 for cost in costs.values())  # which is dearer is a timing: not asserted
    run = TuneRun(cnn.job, Constraint(budget_usd=0.05), tmp_path / "run")
    run.plan()  # from the cached profile
    drawn = mean_factor(cnn.job.sample_configs(), cnn.profile.config_costs)
    assert record_to_json(run.record)["compute_factor"] == pytest.approx(drawn)
    if abs(drawn - 1.0) >= 0.005:  # shown, and recorded once
        assert run.compute_note is not None and f"{drawn:.2f}x" in run.compute_note
        assert [e["text"] for e in record_to_json(run.record)["events"]].count(
            run.compute_note
        ) == 1
    mean, _ = planning_inputs(cnn.profile, load_workload("mobilenet-cifar10"), run.catalog)
    for (m, priced), (_, at_mean) in zip(
        run.workload.compute.points, mean.compute.points, strict=True
    ):
        assert priced == pytest.approx(at_mean * drawn), m
    # A training run trains the job's own configuration (model.width 8): priced as that one.
    train = TrainRun(cnn.job, Constraint(budget_usd=0.05), tmp_path / "train")
    train.plan()
    own = costs[config_text({"model.width": 8})]
    assert record_to_json(train.record)["compute_factor"] == pytest.approx(own)


def test_a_runs_functions_import_the_worker_as_they_start(
    logreg: Measured, catalog: Catalog
) -> None:
    """As a Lambda's init phase runs its handler module's imports: in the cold start the
    probe measures, not in a run's first invocation of each function."""
    loaded = "'faasml.runtime.function.worker' in __import__('sys').modules"
    with open_platform("local", catalog, **logreg.options) as platform:
        assert platform.invoke("builtins:eval", loaded, 512).result(timeout=60) is True
    with open_platform("local", catalog) as bare:
        assert bare.invoke("builtins:eval", loaded, 512).result(timeout=60) is False


def test_a_torch_model_needs_more_memory_than_a_numpy_one(logreg: Measured, cnn: Measured) -> None:
    worker = "faasml.runtime.function.worker"  # imported as a function starts, on every job
    assert cnn.options == {"preload": ("torch", worker)}
    assert logreg.options == {"preload": (worker,)}
    assert cnn.profile.footprint_mb > logreg.profile.footprint_mb + 50
    assert cnn.profile.params > logreg.profile.params
    assert cnn.profile.configs == 3  # the job's own, then model.width at 4 and at 8


@pytest.mark.parametrize("name", ["logreg", "cnn"])
def test_probe_invocations_are_billed_as_profiling(
    name: str, request: pytest.FixtureRequest
) -> None:
    measured: Measured = request.getfixturevalue(name)
    charges = measured.meter.charges
    # the roomy probe, at least one smaller one, three warm round trips
    assert len(charges) >= 5
    assert {c.kind for c in charges} == {"profiling"}
    assert all(c.usd > 0 for c in charges)
    assert measured.meter.by_kind()["profiling"] == pytest.approx(measured.profile.profiling_usd)
    roomy = roomy_memory_mb(measured.meter.catalog)
    assert f"{roomy} MB" in {c.detail for c in charges}


def test_the_same_key_is_served_from_the_cache_without_invoking_the_platform(
    logreg: Measured, catalog: Catalog, tmp_path: Path
) -> None:
    # The same job from another file (its name differs, nothing measured does).
    again = load_job(_write(tmp_path, {**LOGREG, "name": "another-name"}))
    assert profile_key(again, catalog, logreg.options) == logreg.profile.key
    platform = open_platform("local", catalog, **logreg.options)
    meter = Meter(catalog)
    try:
        found = measure_job(again, catalog, platform, meter=meter, platform_options=logreg.options)
        assert platform.cold_starts == 0  # a fresh platform: any invocation starts a function
    finally:
        platform.close()
    assert found.cached
    assert meter.charges == []
    assert dataclasses.replace(found, cached=False) == logreg.profile


def test_refresh_measures_again_and_bills_again(
    logreg: Measured, catalog: Catalog, tmp_path: Path
) -> None:
    platform = open_platform("local", catalog, **logreg.options)
    meter = Meter(catalog)
    try:
        fresh = measure_job(
            logreg.job,
            catalog,
            platform,
            meter=meter,
            refresh=True,
            platform_options=logreg.options,
        )
        assert platform.cold_starts >= 1
    finally:
        platform.close()
    assert not fresh.cached and fresh.key == logreg.profile.key
    assert fresh.measured_at >= logreg.profile.measured_at
    assert meter.by_kind()["profiling"] > 0


@pytest.mark.parametrize(
    ("base", "change"),
    [
        (LOGREG, {"batch_size": 64}),
        (CNN, {"batch_size": 16}),
        (CNN, {"model": {**CNN["model"], "width": 16}}),
        (CNN, {"model": {**CNN["model"], "blocks": 3}}),
        (CNN, {"search_space": {**CNN["search_space"], "model.width": {"choice": [4, 32]}}}),
        (LOGREG, {"dataset": {**LOGREG["dataset"], "samples": 3000}}),
    ],
)
def test_what_changes_the_measurement_changes_the_key(
    base: dict[str, Any], change: dict[str, Any], catalog: Catalog, tmp_path: Path
) -> None:
    job = load_job(_write(tmp_path, base, "base.yaml"))
    same = load_job(_write(tmp_path, base, "same.yaml"))
    changed = load_job(_write(tmp_path, {**base, **change}, "changed.yaml"))
    assert profile_key(same, catalog, {}) == profile_key(job, catalog, {})
    assert profile_key(changed, catalog, {}) != profile_key(job, catalog, {})


def test_platform_options_change_the_key(catalog: Catalog, tmp_path: Path) -> None:
    job = load_job(_write(tmp_path, CNN))
    assert profile_key(job, catalog, {"preload": ("torch",)}) != profile_key(job, catalog, {})


@pytest.mark.parametrize("name", ["logreg", "cnn"])
def test_a_tune_plan_never_chooses_memory_below_the_footprint(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    measured: Measured = request.getfixturevalue(name)
    floor = measured.profile.memory_floor_mb()
    for constraint in (Constraint(deadline_s=600.0), Constraint(budget_usd=0.05)):
        run = TuneRun(measured.job, constraint, tmp_path / f"run-{constraint.deadline_s}")
        run.plan()
        plan = record_to_json(run.record)["plan"]
        assert record_to_json(run.record)["profile"]["key"] == measured.profile.key
        assert record_to_json(run.record)["profile_cached"] is True
        assert plan["workload"] == "measured"
        assert len(plan["stages"]) == 2  # 4 trials, η = 2: ⌊log_2 4⌋ stages
        for stage in plan["stages"]:
            assert stage["allocation"]["memory_mb"] >= floor, (stage, floor)
            assert stage["predicted_time_s"] > 0 and stage["predicted_cost_usd"] > 0
        # A cached profile costs the run nothing.
        assert not any(c["kind"] == "profiling" for c in record_to_json(run.record)["charges"])


def test_a_tune_run_that_measures_bills_it_and_records_the_profile(
    logreg: Measured, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    run = TuneRun(logreg.job, Constraint(budget_usd=0.05), run_dir, reprofile=True)
    run.plan()
    assert record_to_json(run.record)["profile_cached"] is False
    profiling = [c for c in record_to_json(run.record)["charges"] if c["kind"] == "profiling"]
    assert profiling and sum(c["usd"] for c in profiling) == pytest.approx(
        record_to_json(run.record)["profile"]["profiling_usd"]
    )
    assert any("job profile" in e["text"] for e in record_to_json(run.record)["events"])

    state = record_to_json(run.execute())
    assert state["status"] == "finished"
    record = json.loads((run_dir / "record.json").read_text())
    profile = JobProfile.from_dict(record["profile"])
    assert profile.key == logreg.profile.key and not profile.cached
    assert profile.footprint_mb > 0 and profile.compute_points
    stages = record["plan"]["stages"]
    assert all("measured_time_s" in s and "measured_cost_usd" in s for s in stages)
    assert all(s["measured_time_s"] > 0 for s in stages)
    assert all("repredicted_time_s" in s for s in stages[1:])
    assert "repredicted_time_s" not in stages[0]
    assert set(record["calibration"]) >= {str(stages[0]["allocation"]["memory_mb"])}
    # The profile's charges stay in the bill beside the run's own.
    kinds = {c["kind"] for c in record["charges"]}
    assert {"profiling", "function", "invocation"} <= kinds


def test_a_resumed_run_plans_from_the_profile_in_its_record(
    logreg: Measured, tmp_path: Path
) -> None:
    run = TuneRun(logreg.job, Constraint(budget_usd=0.05), tmp_path / "run")
    run.plan()
    assert run.record.plan is not None
    allocation = run.record.plan.stages[0].allocation
    again = resume_run(tmp_path / "run")
    recorded = JobProfile.from_dict(record_to_json(again.record)["profile"])
    assert recorded == JobProfile.from_dict(record_to_json(run.record)["profile"])
    # What the resumed run prices its segments and re-plans with is what the plan was made with.
    assert again.predicted_round_s(allocation) == pytest.approx(run.predicted_round_s(allocation))
    planned_on = JobProfile.from_dict(record_to_json(run.record)["profile"])
    assert again.plan_catalog.platform.cold_start_s == planned_on.cold_start_s
    needed = float(again.workload.memory_needed_mb(1))
    assert needed == pytest.approx(planned_on.memory_floor_mb())


def test_planning_inputs_hold_the_footprint_with_its_margin() -> None:
    catalog = load_catalog("local")
    base = dataclasses.replace(load_workload("lr-higgs"), dataset_mb=30.0, model_mb=0.5)
    profile = JobProfile(
        key="hand-made",
        params=1000,
        model_mb=0.004,
        bytes_per_sample=120.0,
        footprint_mb=300.0,
        compute_points=((384, 2e-5), (1792, 1e-5), (3520, 6e-6)),
        eval_points=((384, 4e-6), (1792, 2e-6), (3520, 1e-6)),
        checkpoint_s=0.03,
        cold_start_s=0.8,
        dispatch_s=0.002,
        train_samples=8000,
        test_samples=2000,
        configs=1,
        profiling_usd=1e-4,
        profiling_s=5.0,
    )
    workload, planning = planning_inputs(profile, base, catalog)
    assert float(workload.memory_needed_mb(1)) == pytest.approx(300.0 * 1.2)
    assert float(workload.memory_needed_mb(4)) < 300.0 * 1.2  # the partition shrinks as D/n
    assert workload.model_mb == pytest.approx(0.004)
    # u(m) in seconds per MB: (train + eval × test/train) per sample / MB per sample
    points = dict(workload.compute.points)
    assert workload.compute.kind == "table" and sorted(points) == [384.0, 1792.0, 3520.0]
    assert points[384.0] == pytest.approx((2e-5 + 4e-6 * 0.25) / 120e-6)
    assert planning.platform.cold_start_s == 0.8
    assert planning.platform.warm_start_s == pytest.approx(0.032)
    # Prices are the catalog's own.
    assert planning.platform.price_per_gb_s == catalog.platform.price_per_gb_s
    assert catalog.platform.cold_start_s == 1.0  # the catalog itself is left alone

    # Data larger than the footprint's room: the need never drops below the footprint.
    roomy = dataclasses.replace(base, dataset_mb=500.0)
    heavy, _ = planning_inputs(profile, roomy, catalog)
    assert float(heavy.memory_needed_mb(1)) >= 300.0 * 1.2
    assert heavy.runtime_mb == 0.0


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FAASML_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" / "profiles"
    monkeypatch.delenv("FAASML_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "faasml" / "profiles"
    assert os.environ.get("FAASML_CACHE") is None


def test_the_probe_measures_functions_side_by_side_on_a_bounded_machine(
    logreg: Measured,
) -> None:
    profile, platform = logreg.profile, logreg.meter.catalog.platform
    roomy = roomy_memory_mb(logreg.meter.catalog)
    assert platform.capacity_vcpus is not None  # the local machine bounds its functions
    if int(platform.max_concurrent(roomy)) < 2:  # a one-core machine: nothing side by side
        assert profile.side_by_side_ratio == 0 and profile.delivered_vcpus == 0
        return
    assert profile.side_by_side_ratio > 0
    assert 0 < profile.delivered_vcpus <= platform.capacity_vcpus
    # The profile's record keeps both, and the plan reads what was delivered.
    assert JobProfile.from_dict(profile.to_dict()).delivered_vcpus == profile.delivered_vcpus
    workload = load_workload("lr-higgs")
    _, plan_catalog = planning_inputs(profile, workload, logreg.meter.catalog)
    assert plan_catalog.platform.delivered_vcpus == profile.delivered_vcpus


@pytest.mark.parametrize("name", ["logreg", "cnn"])
def test_the_probe_measures_a_synchronised_round_and_plans_price_it(
    name: str, request: pytest.FixtureRequest
) -> None:
    from faasml.models.perf import epoch_time

    measured: Measured = request.getfixturevalue(name)
    profile, catalog = measured.profile, measured.meter.catalog
    # The round was measured (no note of a failed one); a busy machine may have made the
    # probe time its function alone once more, which it notes.
    retimed = "the function timed alone ran slower than the group side by side"
    assert [note for note in profile.notes if not note.startswith(retimed)] == []
    assert profile.sync_storage == "embedded"  # the job's store
    assert profile.sync_memory_mb == roomy_memory_mb(catalog)
    schemes = {scheme for scheme, _, _ in profile.sync_rounds}
    assert schemes == set(catalog.storage("embedded").schemes)  # each scheme it offers
    assert all(transfer > 0 and wait >= 0 for _, transfer, wait in profile.sync_rounds)
    assert profile.straggler_share >= 0
    # The two functions of the round are billed as profiling, at their memory.
    details = [c.detail for c in measured.meter.charges if c.kind == "profiling"]
    assert details.count(f"{profile.sync_memory_mb} MB") >= 2
    # The plans' epoch time at two functions synchronises as measured (taken back to functions
    # that had their share: the stage estimates slow the wave by its contention), and waits
    # for the slower function the measured share of its computation.
    workload, planning = planning_inputs(profile, load_workload("lr-higgs"), catalog)
    assert workload.straggler_share == profile.straggler_share
    # What of u(m) is evaluation (worker 0 evaluates the whole test set at every n).
    ratio = profile.test_samples / profile.train_samples
    evals = dict(profile.eval_points)
    shares = [evals[m] * ratio / (s + evals[m] * ratio) for m, s in profile.compute_points]
    assert 0 < workload.evaluation_share < 1
    assert workload.evaluation_share == pytest.approx(sum(shares) / len(shares))
    platform, service = planning.platform, planning.storage("embedded")
    kappa = platform.contention(2 * float(platform.vcpus(profile.sync_memory_mb)))
    for scheme, transfer, _ in profile.sync_rounds:
        epoch = epoch_time(workload, platform, service, service, scheme, 2, profile.sync_memory_mb)
        waited = profile.straggler_share * float(epoch.compute_s)
        per_round = (float(epoch.sync_s) - waited) / int(epoch.iterations)
        assert per_round == pytest.approx(transfer / kappa, rel=1e-6)
    assert catalog.storage("embedded").scheme_latency_s == {}


def test_the_store_changes_the_key(catalog: Catalog, tmp_path: Path) -> None:
    job = load_job(_write(tmp_path, LOGREG))
    other = load_job(_write(tmp_path, {**LOGREG, "store": "vm-ps"}, "ps.yaml"))
    assert profile_key(other, catalog, {}) != profile_key(job, catalog, {})
