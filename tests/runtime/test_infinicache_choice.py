"""InfiniCache as the planner's storage choice: offered only when a job names it, priced by
its URL's nodes x memory, started by the run and stopped after, billed from its nodes' real
invocations; a run through it gives the embedded store's exact model results."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.job import from_mapping
from faasml.runtime.profile.calibrate import profile_job, write_profile
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.base import stores_catalog
from faasml.runtime.runs.session import TuneRun
from faasml.types import Constraint

from .tiny_jobs import tiny_tune_job

pytest.importorskip("zfec")

URL = "infinicache://?data=2&parity=1&nodes=3&memory=160&cpu=none"

JOB = tiny_tune_job("infinicache-choice")


def test_offered_only_when_named_and_priced_by_the_url() -> None:
    catalog = load_catalog("local")
    assert "infinicache" not in {name for name, _ in catalog.sync_options()}
    named = catalog.restricted_to(["embedded", "infinicache"])
    assert ("infinicache", "scatter-reduce") in named.sync_options()
    price = catalog.platform.price_per_gb_s
    service = catalog.storage("infinicache")
    assert service.pricing == "function" and service.billed_by_time
    assert service.hourly_usd == pytest.approx(
        service.cache_nodes * service.cache_memory_mb / 1024 * 3600 * price
    )
    job = from_mapping({**JOB, "store": URL})
    priced = stores_catalog(catalog, job.sync_stores()).storage("infinicache")
    assert (priced.cache_nodes, priced.cache_memory_mb) == (3, 160)
    assert priced.hourly_usd == pytest.approx(3 * 160 / 1024 * 3600 * price)


def _metrics(entry: dict[str, Any]) -> dict[str, Any]:
    """What a trial's epoch learned (its loss and accuracy), not how long it took."""
    return {k: v for k, v in entry.items() if "loss" in k or "acc" in k}


def _run(store: str, folder: Path) -> tuple[dict[str, Any], list[Any]]:
    job = from_mapping({**JOB, "store": store})
    run = TuneRun(job, Constraint(budget_usd=0.05), folder, measure=False)
    plan = run.plan()
    # On two cores the planner gives this small job one worker, which synchronises with
    # nobody; two workers make every round's gradients cross the store.
    for stage in plan.stages:
        stage.allocation = dataclasses.replace(
            stage.allocation, n=2, memory_mb=512, scheme="scatter-reduce"
        )
    record = record_to_json(run.execute())
    assert record["status"] == "finished", record.get("events")
    results = [
        (t["trial_id"], t["config"], t["epochs_done"], [_metrics(h) for h in t["history"]])
        for t in record["trials"]
    ]
    return record, results


def test_a_tuning_run_through_infinicache_matches_the_embedded_store(tmp_path: Path) -> None:
    _, embedded = _run("embedded", tmp_path / "embedded")
    record, cached = _run(URL, tmp_path / "infinicache")
    assert {s["allocation"]["storage"] for s in record["plan"]["stages"]} == {"infinicache"}
    assert cached == embedded  # the sync is exact: the same models, bit for bit
    charges = [c for c in record["charges"] if c["kind"] == "cache"]
    assert len(charges) == 1 and charges[0]["usd"] > 0
    assert charges[0]["detail"].startswith("infinicache: ")
    _, invocations, _, gb_s, _ = charges[0]["detail"].split()
    assert float(invocations) >= 3 and float(gb_s) > 0  # every node ran (the warm-up at least)
    assert not [c for c in record["charges"] if c["kind"] == "server"]


def test_profile_measures_infinicache_through_a_deployment_it_starts(tmp_path: Path) -> None:
    job = from_mapping({**JOB, "stores": {"infinicache": URL}})
    result = profile_job(job, memories=(512,), counts=(2,), rounds=2, work_dir=tmp_path / "w")
    store = result.stores["infinicache"]
    assert store.latency_s > 0 and store.bandwidth_mbps > 0
    assert set(store.sync_s_per_round) == {"n=2 allreduce", "n=2 scatter-reduce"}
    _, catalog_path = write_profile(job, result, tmp_path / "profile")
    measured = load_catalog(catalog_path).storage("infinicache")
    assert measured.connection_mbps == pytest.approx(store.bandwidth_mbps, rel=1e-3)
    assert measured.pricing == "function" and measured.offered == "named"
