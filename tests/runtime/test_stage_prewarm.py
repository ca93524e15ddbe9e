"""A tuning run starts the next stage's functions during the current stage's last wave where
the next stage moves to another memory size (CE-scaling's delayed restart between stages), and
its estimates leave out only the part of that cold start the prewarm hides."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.catalog import Catalog, load_catalog
from faasml.job import load_job
from faasml.runtime.coordinator import CoordinatorOptions, launcher
from faasml.runtime.platforms.contract import Invocation, open_platform
from faasml.runtime.platforms.local import LocalPlatform
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.record.records import StageRecord
from faasml.runtime.runs.session import TuneRun
from faasml.runtime.runs.stage_pricing import (
    NO_EARLY_START,
    prewarmed,
    stage_estimate,
    stage_estimates,
    warm_pool,
)
from faasml.types import Allocation, Constraint
from faasml.workload import Workload

from .table_workload import table_workload
from .tiny_jobs import four_trial_tune_job


def _stage(trials: int, memory_mb: int, epochs: int = 1, n: int = 1) -> StageRecord:
    allocation = Allocation(n=n, memory_mb=memory_mb, storage="s3", scheme="allreduce")
    return StageRecord(0, trials, epochs, allocation, 0.0, 0.0, 0.0, 0.0)


@pytest.fixture
def workload() -> Workload:
    return table_workload()


def _bounded(catalog: Catalog, vcpus: float) -> Catalog:
    platform = dataclasses.replace(catalog.platform, capacity_vcpus=vcpus)
    return dataclasses.replace(catalog, platform=platform)


def test_a_stage_on_a_new_size_waits_only_for_the_part_of_its_start_not_hidden(
    workload: Workload,
) -> None:
    catalog = load_catalog("aws-lambda")
    plan = [_stage(8, 1024, epochs=3), _stage(4, 2048, epochs=3)]
    estimates = stage_estimates(workload, catalog, plan)
    pool = warm_pool(workload, catalog, plan[:1])
    started, hidden, _ = prewarmed(workload, catalog, plan[0], plan[1], pool)
    assert started == 4 and hidden > 0  # 4 trials on one function each, none of 2048 MB warm
    allocation = plan[1].allocation
    cold = stage_estimate(workload, catalog, allocation, 4, 3)
    warm = stage_estimate(workload, catalog, allocation, 4, 3, warm=4)
    assert cold[0] > warm[0]  # the cold start is priced without a prewarm
    start_s = cold[0] - warm[0]
    assert estimates[1][0] == pytest.approx(warm[0] + max(0.0, start_s - hidden))
    assert estimates[1][1] == pytest.approx(cold[1])  # the prewarmed starts are billed
    # The same size as the stage before: its functions are warm, nothing to start.
    same = [_stage(8, 1024), _stage(4, 1024)]
    pool = warm_pool(workload, catalog, same[:1])
    assert prewarmed(workload, catalog, same[0], same[1], pool) == NO_EARLY_START


def test_no_prewarm_is_priced_where_it_does_not_fit_beside_the_last_wave(
    workload: Workload,
) -> None:
    catalog = load_catalog("aws-lambda")
    plan = [_stage(2, 1769), _stage(1, 3538)]
    roomy, tight = _bounded(catalog, 8.0), _bounded(catalog, 2.0)
    assert prewarmed(workload, roomy, plan[0], plan[1], {})[0] == 1
    # Two functions of one vCPU in the last wave fill two vCPUs: no room for one of two.
    assert prewarmed(workload, tight, plan[0], plan[1], {}) == NO_EARLY_START
    allocation = plan[1].allocation
    assert stage_estimates(workload, tight, plan)[1] == pytest.approx(
        stage_estimate(workload, tight, allocation, 1, 1)
    )


# ------------------------------------------------------------------ a real run, local platform

STAGE_1_MB, STAGE_2_MB = 320, 384


def _forced_run(tmp_path: Path, name: str) -> TuneRun:
    """Four trials, two stages of two epochs, planned onto two memory sizes (the plan is set,
    and re-planning is off, so the test does not depend on what the planner prefers)."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(four_trial_tune_job(name, epochs_per_stage=2)))
    run = TuneRun(
        load_job(job_file),
        Constraint(budget_usd=0.05),
        tmp_path / "run",
        measure=False,
        options=CoordinatorOptions(epochs_per_segment=1),  # one invocation an epoch
    )
    run.plan()
    run.delta = math.inf
    assert run.record.plan is not None
    for stage, memory in zip(run.record.plan.stages, (STAGE_1_MB, STAGE_2_MB), strict=True):
        stage.allocation = Allocation(n=1, memory_mb=memory, storage="embedded", scheme="allreduce")
    return run


def test_the_next_stage_starts_on_functions_prewarmed_during_the_last_wave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoked: list[tuple[int, Invocation]] = []
    real = LocalPlatform.invoke

    def spy(self: LocalPlatform, fn: Any, payload: Any, memory_mb: int, timeout_s: Any) -> Any:
        invocation = real(self, fn, payload, memory_mb, timeout_s)
        invoked.append((memory_mb, invocation))
        return invocation

    monkeypatch.setattr(LocalPlatform, "invoke", spy)
    # As soon as the last wave runs, whatever its predicted time left (a slow first epoch on
    # a busy machine must not push the prewarm past the wave's end).
    monkeypatch.setattr(launcher, "PREWARM_LEAD", math.inf)
    run = _forced_run(tmp_path, "prewarm-stages")
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    assert [t["status"] for t in record["trials"]].count("done") == 2
    second = [i for memory, i in invoked if memory == STAGE_2_MB]
    assert len(second) == 4  # 2 trials × 2 epochs on the second stage's size
    bills = [i.billed for i in second]
    assert all(b is not None and b.ok for b in bills)
    assert [b.cold for b in bills if b is not None] == [False] * 4  # every start warm
    # Its two functions were started ahead and billed on their own; none other.
    prewarms = [c for c in record["charges"] if c["detail"].startswith("prewarm")]
    assert len(prewarms) == 2 and all(c["usd"] > 0 for c in prewarms)
    first_cold = sum(1 for memory, i in invoked if memory == STAGE_1_MB and i.billed.cold)
    assert record["cold_starts"] == first_cold + 2
    assert any("prewarmed" in e["text"] for e in record["events"])
    # Each stage is measured with what it ran on: the prewarmed starts, billed during the
    # first stage's last wave, are the second stage's (as its prediction has them).
    charges = [c for c in record["charges"] if c["kind"] != "profiling"]

    def ran_on(memory_mb: int) -> float:
        times = {c["t_s"] for c in charges if c["detail"] == f"{memory_mb} MB"}
        return sum(c["usd"] for c in charges if c["t_s"] in times and c["trial"] >= 0)

    first, second_stage = record["plan"]["stages"]
    assert first["measured_cost_usd"] == pytest.approx(ran_on(STAGE_1_MB))
    assert second_stage["measured_cost_usd"] == pytest.approx(
        ran_on(STAGE_2_MB) + sum(c["usd"] for c in prewarms)
    )


def test_a_run_whose_stages_share_a_size_prewarms_nothing(tmp_path: Path) -> None:
    run = _forced_run(tmp_path, "prewarm-none")
    assert run.record.plan is not None
    for stage in run.record.plan.stages:
        stage.allocation = dataclasses.replace(stage.allocation, memory_mb=STAGE_1_MB)
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    assert not [c for c in record["charges"] if c["detail"].startswith("prewarm")]
    assert not any("prewarmed" in e["text"] for e in record["events"])


def test_a_prewarmed_function_taken_before_it_is_ready_bills_no_second_twice() -> None:
    """Its start is billed up to the invocation's dispatch; the invocation from there (a
    Python process cannot be ready microseconds after it was started, so the two meet)."""
    with open_platform("local", load_catalog("local")) as platform:
        began = time.monotonic()
        assert platform.prewarm(320, 1) == 1
        invocation = platform.invoke("faasml.testing.functions:pid", None, 320)
        invocation.result(timeout=60)
        wall = time.monotonic() - began
        billed = invocation.billed
        assert billed is not None and not billed.cold
        standalone = platform.take_standalone_bills()
        assert len(standalone) == 1 and standalone[0].cold
        assert standalone[0].duration_s + billed.duration_s <= wall
