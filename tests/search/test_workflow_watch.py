"""Online learning from a watched folder (``workflow.online.watch``): chunk files that land
there are trained on as they land, in name order; unfinished, hidden and bad files are not; a
run whose next file does not come ends saying so. Real runs on the local platform, with the
files written by a thread as a data pipeline would."""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from faasml.exceptions import ConfigError, WorkloadError
from faasml.job import JobSpec, from_mapping
from faasml.job.workflow import WatchSpec
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.chunk_files import await_chunk, joined, landed_files
from faasml.runtime.runs.workflow import WorkflowRun, workflow_phases
from faasml.types import Constraint
from faasml.workloads.data import Dataset, write_npz
from faasml.workloads.synthetic import higgs_like

from .test_workflow_runs import BASE as RUNS_BASE
from .test_workflow_runs import SEARCH

BASE: dict[str, Any] = {
    **RUNS_BASE,
    "name": "watched",
    "dataset": {"synthetic": "higgs-like", "samples": 1000, "test_fraction": 0.2},
    "training": {"max_epochs": 3},
}


def job(folder: Path, **watch: Any) -> JobSpec:
    online = {"watch": {"folder": str(folder), "files": 2, **watch}, "epochs_per_chunk": 1}
    return from_mapping({**BASE, "workflow": {"online": online, "search": SEARCH}})


def drop(folder: Path, name: str, samples: int, seed: int) -> None:
    """Write a chunk as a pipeline should: under a temporary name, then renamed in."""
    part = folder / f"{name}.part"
    write_npz(part, higgs_like(samples, seed=seed))
    part.rename(folder / name)


# ----------------------------------------------------------------------------- job files


def test_a_watched_folder_is_read_resolved_and_round_trips(tmp_path: Path) -> None:
    (tmp_path / "incoming").mkdir()
    spec = from_mapping(
        {
            **BASE,
            "workflow": {
                "online": {"watch": {"folder": "incoming", "files": 3, "timeout_s": 30}},
            },
        },
        base_dir=tmp_path,
    )
    assert spec.workflow is not None and spec.workflow.watch is not None
    watch = spec.workflow.watch
    assert Path(watch.folder) == (tmp_path / "incoming").resolve()
    assert (watch.files, watch.format, watch.timeout_s) == (3, "npz", 30.0)
    again = from_mapping(spec.to_dict())
    assert again.workflow == spec.workflow
    phases = workflow_phases(spec.workflow, 32, {"name": "logistic-regression"}, 800, 3)
    # The job's own data, then one phase per file (each taken to be as large until it lands).
    assert [p.samples for p in phases] == [800, 1600, 2400, 3200]
    assert [p.first_epoch for p in phases] == [0, 1, 2, 3]
    assert [bool(p.change) for p in phases] == [False, True, True, True]


@pytest.mark.parametrize(
    ("online", "message"),
    [
        ({"watch": {"folder": "nowhere", "files": 2}}, "watch.folder is 'nowhere', but must name"),
        ({"watch": {"folder": ".", "files": 0}}, "watch.files is 0, but must be >= 1"),
        ({"watch": {"folder": ".", "files": 1, "format": "xls"}}, "watch.format is 'xls'"),
        (
            {"watch": {"folder": ".", "files": 1, "timeout_s": 0}},
            "timeout_s is 0.0, but must be > 0",
        ),
        ({"watch": {"folder": ".", "files": 1, "every": 2}}, "unknown field\\(s\\): every"),
        ({"watch": {"folder": ".", "files": 1}, "chunks": 2}, "has watch and chunks"),
    ],
)
def test_a_watch_that_cannot_run_is_a_one_line_error(
    tmp_path: Path, online: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping({**BASE, "workflow": {"online": online}}, base_dir=tmp_path)


# ----------------------------------------------------------------------------- the folder


def test_only_complete_files_not_taken_land_in_name_order(tmp_path: Path) -> None:
    for name in ("b.npz", "a.npz", ".hidden.npz", "c.npz.part", "d.tmp", "e.partial"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    assert [p.name for p in landed_files(tmp_path, set())] == ["a.npz", "b.npz"]
    assert [p.name for p in landed_files(tmp_path, {"a.npz"})] == ["b.npz"]
    assert landed_files(tmp_path / "gone", set()) == []


def test_a_chunk_joins_only_with_the_jobs_samples() -> None:
    data = higgs_like(10, seed=0)
    both = joined(data, higgs_like(5, seed=1), "c.npz")
    assert len(both) == 15 and both.num_classes == data.num_classes
    assert (both.features[:10] == data.features).all()
    with pytest.raises(WorkloadError, match=r"c\.npz: its samples have shape \(5,\)"):
        joined(data, higgs_like(5, features=5, seed=1), "c.npz")
    three = Dataset.from_arrays(data.features[:3], [0, 1, 2], 3)
    with pytest.raises(WorkloadError, match=r"labels reach 2, but must lie in \[0, 2\)"):
        joined(data, three, "c.npz")


def test_a_bad_file_is_rejected_and_the_wait_goes_on_until_the_timeout(tmp_path: Path) -> None:
    watch = WatchSpec(folder=str(tmp_path), files=1, timeout_s=1.0, poll_s=0.25)
    ticks = itertools.count()
    clock = lambda: next(ticks) * 0.25  # noqa: E731 - a clock that moves a poll a call
    (tmp_path / "a.npz").write_bytes(b"not an npz")
    rejected: list[tuple[str, str]] = []
    taken: set[str] = set()
    data = higgs_like(10, seed=0)

    def reject(name: str, why: str) -> None:
        rejected.append((name, why))

    sleeps: list[float] = []
    assert await_chunk(watch, data, taken, reject, clock=clock, sleep=sleeps.append) is None
    assert [name for name, _ in rejected] == ["a.npz"] and taken == {"a.npz"}
    assert sleeps and all(0 < s <= watch.poll_s for s in sleeps)

    # A good file landing later is taken, joined to the data.
    write_npz(tmp_path / "b.npz", higgs_like(4, seed=2))
    landed = await_chunk(watch, data, taken, reject, clock=clock, sleep=sleeps.append)
    assert landed is not None
    name, joined_data, samples = landed
    assert (name, samples, len(joined_data)) == ("b.npz", 4, 14)
    assert len(rejected) == 1  # a.npz is not looked at again


# ----------------------------------------------------------------------------- real runs


def test_each_file_landing_is_trained_on_with_the_data_before_it(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "ignored.npz.part").write_bytes(b"still being written")

    def pipeline() -> None:  # two chunks, the second while the first phase may still train
        drop(incoming, "chunk-001.npz", 300, seed=11)
        time.sleep(0.3)
        (incoming / "chunk-002.npz").write_bytes(b"corrupt")
        drop(incoming, "chunk-003.npz", 200, seed=12)

    writer = threading.Thread(target=pipeline)
    flow = WorkflowRun(job(incoming, timeout_s=120), Constraint(budget_usd=1.0), tmp_path / "run")
    flow.plan()
    writer.start()
    try:
        record = record_to_json(flow.execute())
    finally:
        writer.join()
    assert record["status"] == "finished"
    phases = record["workflow"]["phases"]
    assert [p["samples"] for p in phases] == [800, 1100, 1300]
    assert [p["retrigger"] for p in phases] == [False, True, True]
    assert phases[1]["change"].startswith("chunk file 1 of 2 landed: chunk-001.npz (300 samples")
    chunks = record["workflow"]["chunks"]
    assert [c["file"] for c in chunks] == ["chunk-001.npz", "chunk-003.npz"]
    assert [r["file"] for r in record["workflow"]["rejected"]] == ["chunk-002.npz"]
    assert any("chunk-002.npz rejected" in e["text"] for e in record["events"])
    assert [h["epoch"] for h in record["trials"][0]["history"]] == [1, 2, 3]


def test_a_run_whose_next_file_does_not_land_stops_saying_so(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    drop(incoming, "only.npz", 200, seed=5)
    flow = WorkflowRun(
        job(incoming, timeout_s=0.3, poll_s=0.05), Constraint(budget_usd=1.0), tmp_path / "run"
    )
    flow.plan()
    record = record_to_json(flow.execute())
    assert record["status"] == "stopped"
    assert "no chunk file landed" in record["stop_reason"]
    assert "file 2 of 2" in record["stop_reason"]
    phases = record["workflow"]["phases"]
    assert [p["samples"] for p in phases] == [800, 1000]  # trained on all that landed
    assert record["best"]["checkpoint"]


def test_a_stopped_run_resumes_on_the_files_it_took_and_waits_for_the_rest(
    tmp_path: Path,
) -> None:
    from faasml.runtime.runs.session import resume_run

    incoming = tmp_path / "incoming"
    incoming.mkdir()
    drop(incoming, "a.npz", 200, seed=5)
    run_dir = tmp_path / "run"
    flow = WorkflowRun(
        job(incoming, timeout_s=0.3, poll_s=0.05), Constraint(budget_usd=1.0), run_dir
    )
    flow.plan()
    stopped = record_to_json(flow.execute())
    assert stopped["status"] == "stopped"

    drop(incoming, "b.npz", 100, seed=6)
    resumed = record_to_json(resume_run(run_dir).execute())
    assert resumed["status"] == "finished"
    # a.npz read again (the data it trained on), b.npz taken next: nothing trained twice.
    phases = resumed["workflow"]["phases"]
    assert [p["samples"] for p in phases] == [800, 1000, 1100]
    assert [c["file"] for c in resumed["workflow"]["chunks"]] == ["a.npz", "b.npz"]
    assert [h["epoch"] for h in resumed["trials"][0]["history"]] == [1, 2, 3]


def test_a_failed_search_probe_is_counted_with_its_cause_in_the_summary() -> None:
    from faasml.reports.run_summary import summary_lines

    failed = (
        "epoch 7 batch 0: function timeout: ran past its maximum duration of 0.14 s at 14.6 s "
        "(its budget reservation ran out)"
    )
    from faasml.runtime.record.codec import record_from_json

    fixture = Path(__file__).parents[1] / "runtime" / "records" / "v0-workflow.json"
    record = record_from_json(json.loads(fixture.read_text()))
    record.restarts = 2
    killed = ("function killed: signal 9",)
    record.trials = [dataclasses.replace(record.trials[0], failures=killed)]
    assert record.workflow is not None
    first = record.workflow.phases[0]
    first.probes = [first.probes[0], dataclasses.replace(first.probes[1], failed=failed)]
    record.workflow.current = dataclasses.replace(
        record.workflow.phases[1], probes=[first.probes[0]]
    )
    lines = summary_lines(record)
    assert "trials: 1 done; restarts 2 (1 killed, 1 search probe: budget reservation)" in lines
