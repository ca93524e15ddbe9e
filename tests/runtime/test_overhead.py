"""What a run costs besides its training (bench_overhead.py measures it): the record rewritten
after segments without an fsync but whole, made durable at most once a second and at the
end; where the run's time went (``timings``); one heartbeat thread per warm function; a
function's imports without the planners; the record's plain values made without deep copies."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import faasml
from faasml import _files
from faasml.catalog import load_catalog
from faasml.job import load_job
from faasml.runtime.coordinator import TIMINGS
from faasml.runtime.coordinator.meter import Charge, Meter
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.function import heartbeat as heartbeat_module
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.record.records import RunRecord, TrialRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.runs import base as run_base
from faasml.runtime.runs.session import TuneRun
from faasml.sync.stores import open_store
from faasml.types import Constraint

from .tiny_jobs import four_trial_tune_job, tiny_tune_job


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the fsyncs ``write_atomic`` makes (and still make them)."""
    calls: list[int] = []
    real = _files.os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(_files.os, "fsync", counted)
    return calls


def test_a_record_written_lazily_is_whole_and_compact_and_not_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fsyncs(monkeypatch)
    run_dir = RunDir(tmp_path / "run")
    record = RunRecord("tune", {"name": "lazy"}, None, Constraint(1.0), "local", "local")
    record.trials = [TrialRecord(0, {}, history=({"loss": 0.5},))]
    record.elapsed_s = 1.5
    state = record_to_json(record)
    run_dir.write_record(record, durable=False)
    text = run_dir.record_path.read_text()
    assert json.loads(text) == state
    assert "\n" not in text  # compact: json's C encoder
    assert calls == []
    run_dir.write_record(record)
    assert json.loads(run_dir.record_path.read_text()) == state
    assert "\n" in run_dir.record_path.read_text()  # indented, for people
    assert len(calls) == 1


def _planned_run(tmp_path: Path, job: dict[str, Any]) -> TuneRun:
    """A tuning run of ``job`` in ``tmp_path``, planned from the catalog (durably saved)."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(job))
    run = TuneRun(load_job(job_file), Constraint(budget_usd=0.05), tmp_path / "run", measure=False)
    run.plan()
    return run


def test_a_run_fsyncs_its_record_at_most_once_a_period_after_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _planned_run(tmp_path, tiny_tune_job("lazy-record"))  # a durable save
    calls = _fsyncs(monkeypatch)
    monkeypatch.setattr(run_base, "DURABLE_EVERY_S", 1e9)
    run.save_segment()
    assert calls == []
    assert json.loads(run.dir.record_path.read_text())["status"] == "planned"
    monkeypatch.setattr(run_base, "DURABLE_EVERY_S", 0.0)
    run.save_segment()  # the last fsync is old enough
    assert len(calls) == 1
    monkeypatch.setattr(run_base, "DURABLE_EVERY_S", 1e9)
    run.save()  # not after a segment: always durable
    assert len(calls) == 2


def test_a_tune_run_records_where_its_time_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _planned_run(tmp_path, tiny_tune_job("timings"))
    writes: list[bool] = []
    real = RunDir.write_record

    def write_record(self: RunDir, state: RunRecord, *, durable: bool = True) -> None:
        writes.append(durable)
        real(self, state, durable=durable)

    monkeypatch.setattr(RunDir, "write_record", write_record)
    monkeypatch.setattr(run_base, "DURABLE_EVERY_S", 1e9)
    state = record_to_json(run.execute())
    assert state["status"] == "finished"
    # Two segments (two trials, one epoch): the record is rewritten lazily once per poll that
    # committed some (one for both where they end in the same poll); the durable writes are
    # the stage's end and the run's end, not one per segment more.
    assert state["segments"] == 2
    assert 1 <= writes.count(False) <= 2
    assert 1 <= writes.count(True) <= 3 and writes[-1] is True
    timings = state["timings"]
    assert set(timings) == set(TIMINGS)
    assert all(value >= 0 for value in timings.values())
    assert timings["train_s"] > 0 and timings["segments_s"] > 0
    assert timings["record_s"] <= timings["commit_s"]
    assert timings["run_s"] <= state["elapsed_s"]
    record = json.loads(run.dir.record_path.read_text())
    assert record["timings"] == timings  # the final record, written durably and whole
    assert record["status"] == "finished"


def test_one_heartbeat_thread_beats_for_every_segment_and_stops_on_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_S", 0.01)
    store = open_store(f"embedded://{tmp_path / 'objects'}")
    heartbeat = heartbeat_module.Heartbeat()
    heartbeat.start(store, "seg-a/hb")
    assert store.get("seg-a/hb") is not None  # the first beat is written before training
    beating = [t for t in threading.enumerate() if t.name == "faasml-heartbeat"]
    heartbeat.stop()
    store.delete("seg-a/hb")
    heartbeat.start(store, "seg-b/hb")
    # One thread for both segments: the same one still beats (other tests' threads may come
    # and go meanwhile, so the count of all threads says nothing).
    assert [t for t in threading.enumerate() if t.name == "faasml-heartbeat"] == beating
    assert len(beating) == 1 and beating[0].is_alive()
    first = store.get("seg-b/hb")
    deadline = time.monotonic() + 60  # a hang detector: the loop ends on the next beat
    while store.get("seg-b/hb") == first and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.get("seg-b/hb") != first  # still beating, for the segment in progress
    assert store.get("seg-a/hb") is None  # nothing written under a stopped segment's key
    heartbeat.stop()


FUNCTION_MODULES = (
    "faasml.runtime.platforms._host",
    "faasml.runtime.function.echo",
    "faasml.runtime.function.worker",
    "faasml.runtime.function.probe",
    "faasml.runtime.profile.calibrate",
    "faasml.runtime.profile.sync_round",
    "faasml.sync.stores.infinicache.node",
    "faasml.testing.functions",
    "faasml.workloads.function_model",
)
"""Every module a function instance imports to run what it is invoked with (its host, and
the modules named by the function references faasml invokes, torch models aside)."""


def test_a_function_imports_its_worker_without_the_planners() -> None:
    # scipy alone maps more than a 128 MB function's address space: a module a function
    # imports must not reach the planners (faasml.runtime.runs.stage_pricing imports them).
    code = (
        "MODULES = ('scipy', 'faasml.planners'); "
        f"import sys, {', '.join(FUNCTION_MODULES)}; "
        "print(sorted(m for m in MODULES if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
    # The package's names are all still there, imported on first use.
    assert faasml.plan_training.__module__.startswith("faasml.planners")
    assert faasml.Tuner.__name__ == "Tuner"
    assert set(faasml.__all__) <= set(dir(faasml))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = faasml.nothing  # type: ignore[attr-defined]


def test_the_records_plain_values_are_asdicts_copies() -> None:
    trial = TrialState(3, {"lr": 0.1}, history=[{"loss": 1.0, "reported": {"x": 2.0}}])
    trial.failures.append("epoch 1 batch 0: killed")
    plain = trial.to_dict()
    assert plain == dataclasses.asdict(trial)
    plain["history"][0]["loss"] = 9.0
    plain["history"].append({})
    plain["config"]["lr"] = 1.0
    assert trial.history == [{"loss": 1.0, "reported": {"x": 2.0}}]
    assert trial.config == {"lr": 0.1}
    assert TrialState.from_dict(trial.to_dict()) == trial
    charges = [Charge(1.5, "function", 0.25, 2, "1x128"), Charge(2.0, "storage", 0.5)]
    meter = Meter(load_catalog("local"), charges)
    assert meter.to_list() == [dataclasses.asdict(c) for c in charges]


def test_a_replaced_checkpoint_is_deleted_only_once_the_record_names_its_successor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record is written after the next segments start, and after a segment without an
    fsync; whatever the order, a checkpoint the record on disk names is never deleted, and one
    is deleted only after a durable write names its successor (a run killed, or a machine
    crashed, at any moment resumes)."""
    from faasml.sync.stores.embedded import EmbeddedStore

    run = _planned_run(tmp_path, four_trial_tune_job("deferred-record", 1))
    deleted: list[str] = []
    durable_writes: list[bool] = []
    real = EmbeddedStore._delete_prefix
    real_write = RunDir.write_record

    def write_record(self: RunDir, state: RunRecord, *, durable: bool = True) -> None:
        real_write(self, state, durable=durable)
        durable_writes.append(durable)

    def delete_prefix(self: EmbeddedStore, prefix: str) -> int:
        if "/ckpt/" in prefix:
            on_disk = json.loads(run.dir.record_path.read_text())
            assert prefix not in {t["checkpoint"] for t in on_disk["trials"]}
            assert durable_writes[-1]  # the last write was synced
            deleted.append(prefix)
        return real(self, prefix)

    monkeypatch.setattr(EmbeddedStore, "_delete_prefix", delete_prefix)
    monkeypatch.setattr(RunDir, "write_record", write_record)
    monkeypatch.setattr(run_base, "DURABLE_EVERY_S", 1e9)  # after a segment: never synced
    state = record_to_json(run.execute())
    assert state["status"] == "finished"
    assert deleted  # the two trials kept after stage 1 replaced their checkpoints
    objects = open_store(f"embedded://{run.dir.path / 'objects'}")
    for trial in state["trials"]:
        assert objects.get(trial["checkpoint"]) is not None
