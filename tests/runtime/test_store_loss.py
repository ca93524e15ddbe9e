"""A store that dies mid-run: the run stops cleanly, says which store and how to go on, keeps
its checkpoints, and continues once the store is back (issue 12). A real Redis server, started
here on loopback and stopped in the middle of a two-worker run."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from faasml.job import from_mapping
from faasml.reports.run_outputs import write_outputs
from faasml.runtime.coordinator import CoordinatorOptions
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.base import Snapshot
from faasml.runtime.runs.session import TuneRun, resume_run
from faasml.sync.stores import open_store
from faasml.testing.servers import RedisServer
from faasml.types import Constraint

pytest.importorskip("redis")

JOB: dict[str, Any] = {
    "name": "store-loss",
    "model": "logistic-regression",
    "dataset": {"synthetic": "higgs-like", "samples": 1200, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "search_space": {"optimizer.lr": {"loguniform": [0.01, 0.5]}},
    "tuning": {"trials": 2, "reduction_factor": 2, "epochs_per_stage": 3, "stages": 1},
    "batch_size": 100,
    "seed": 2,
}


def test_a_store_that_dies_mid_run_stops_it_cleanly_and_says_which(tmp_path: Path) -> None:
    if not RedisServer.available():
        pytest.skip("'redis-server' is not installed (apt-get install redis-server)")
    server = RedisServer().start()
    try:
        port = server.port
        job = from_mapping({**JOB, "store": server.url})

        def stop_the_store(snapshot: Snapshot) -> None:
            # Called once a segment is committed and the next segments are launched (the
            # record is written after the launch): each trial has at most its second epoch in
            # flight, which may still finish, and its third starts after the store is gone.
            if snapshot.epochs_done >= 1:
                server.stop()

        run = TuneRun(
            job,
            Constraint(budget_usd=0.05),
            tmp_path / "run",
            progress=stop_the_store,
            options=CoordinatorOptions(epochs_per_segment=1),  # no trial ends in one segment
            outputs=write_outputs,
        )
        plan = run.plan()
        first = plan.stages[0]  # gradients cross Redis:
        first.allocation = dataclasses.replace(first.allocation, n=2, memory_mb=1024)
        record = record_to_json(run.execute())  # no exception: a stop, not a crash

        assert record["status"] == "stopped"
        reason = record["stop_reason"]
        assert "redis" in reason and "unavailable" in reason and "faasml resume" in reason
        assert f"127.0.0.1:{port}" in reason  # which server
        assert [t["status"] for t in record["trials"]] == ["stopped", "stopped"]
        assert not any(t["status"] == "failed" for t in record["trials"])
        done = [t for t in record["trials"] if t["epochs_done"]]
        assert done  # the first segment was kept...
        objects = open_store(f"embedded://{(tmp_path / 'run' / 'objects').resolve()}")
        for trial in done:  # ...with its checkpoint
            assert objects.get(trial["checkpoint"]) is not None
        assert (tmp_path / "run" / "report.md").exists()

        # The store is back (same address): the run continues where it stopped.
        server = RedisServer(port=port).start()
        if server.port != port:
            pytest.skip(f"port {port} was taken meanwhile; the resume part needs it")
        resumed = record_to_json(resume_run(tmp_path / "run").execute())
        assert resumed["status"] == "finished"
        assert [t["epochs_done"] for t in resumed["trials"]] == [3, 3]
    finally:
        server.stop()
