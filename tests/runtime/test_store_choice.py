"""Storage selection for real: `faasml profile` measures every store a job names, the planner
chooses among them from the measured catalog, and the run synchronises through the store the
plan chose and pays for it. Real Redis and Memcached servers, started here on loopback."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.job import from_mapping
from faasml.runtime.profile.calibrate import profile_job, write_profile
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.testing.servers import LocalServer
from faasml.types import Constraint

from .tiny_jobs import tiny_tune_job

redis = pytest.importorskip("redis")
pytest.importorskip("pymemcache")

JOB = tiny_tune_job("store-choice")


def _commands(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("stats")["total_commands_processed"])
    finally:
        client.close()


def _keys(url: str) -> set[bytes]:
    client = redis.Redis.from_url(url)
    try:
        return set(client.scan_iter(count=1000))
    finally:
        client.close()


def test_profile_measures_every_store_the_job_names(
    redis_server: LocalServer, memcached_server: LocalServer, tmp_path: Path
) -> None:
    job = from_mapping(
        {**JOB, "stores": {"redis": redis_server.url, "memcached": memcached_server.url}}
    )
    before = _keys(redis_server.url)
    result = profile_job(job, memories=(512,), counts=(2,), rounds=3, work_dir=tmp_path / "w")
    # Issue 12: the profile left its last rounds' keys under a fixed prefix, and the next
    # profile through the same store read them as its own (scatter-reduce then waited 60 s for
    # a key its peer had already deleted). It leaves nothing behind now.
    assert _keys(redis_server.url) == before
    assert list(result.stores) == ["embedded", "redis", "memcached"]
    for name, store in result.stores.items():
        assert store.latency_s > 0 and store.bandwidth_mbps > 0, name
        assert set(store.sync_s_per_round) == {"n=2 allreduce", "n=2 scatter-reduce"}, name
    _, catalog_path = write_profile(job, result, tmp_path / "profile")
    measured = load_catalog(catalog_path)
    shipped = load_catalog("local")
    for name, store in result.stores.items():
        assert measured.storage(name).connection_mbps == pytest.approx(
            store.bandwidth_mbps, rel=1e-3
        )
        assert measured.storage(name).hourly_usd == shipped.storage(name).hourly_usd
        for scheme in ("allreduce", "scatter-reduce"):  # eq. 3 fitted per scheme
            assert measured.storage(name).latency_for(scheme) == pytest.approx(
                max(store.scheme_latency_s[scheme], 1e-6), rel=1e-2
            )


def test_tuning_runs_through_the_store_the_plan_chose_and_pays_for_it(
    redis_server: LocalServer, tmp_path: Path
) -> None:
    redis_url = redis_server.url
    job = from_mapping({**JOB, "store": redis_url})
    run = TuneRun(job, Constraint(budget_usd=0.05), tmp_path / "run")
    plan = run.plan()
    assert {s.allocation.storage for s in plan.stages} == {"redis"}
    # On two cores the planner gives this small job one worker, which synchronises with
    # nobody; two workers make every round's gradients cross the store.
    first = plan.stages[0]
    first.allocation = dataclasses.replace(first.allocation, n=2, memory_mb=1024)
    before = _commands(redis_url)
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    # The workers' gradients went through Redis: dozens of commands per epoch.
    assert _commands(redis_url) - before > 20
    servers = [c for c in record["charges"] if c["kind"] == "server"]
    assert [c["detail"] for c in servers] == ["redis"]
    hourly = load_catalog("local").storage("redis").hourly_usd
    assert 0 < servers[0]["usd"] <= record["elapsed_s"] / 3600 * hourly


def test_a_store_the_catalog_does_not_price_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="prices no storage of that name"):  # when read
        from_mapping({**JOB, "stores": {"dynamodb": "dynamodb://table"}})
    job = from_mapping(JOB)
    job = dataclasses.replace(job, stores={"dynamodb": "dynamodb://table"})
    with pytest.raises(ConfigError, match="prices no storage of that name"):  # and when run
        TuneRun(job, Constraint(budget_usd=0.05), tmp_path / "run")


def test_profile_command_prints_every_store(redis_server: LocalServer, tmp_path: Path) -> None:
    from faasml.cli.main import main

    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump({**JOB, "stores": {"redis": redis_server.url}}))
    args = ["profile", str(job_file), "--out", str(tmp_path / "p")]
    assert main([*args, "--counts", "2", "--rounds", "2"]) == 0
    catalog = yaml.safe_load((tmp_path / "p" / "catalog.yaml").read_text())
    assert {"embedded", "redis"} <= set(catalog["storage"])
