"""A killed workflow run resumes where it stopped: the phases done and the probes made are kept
(replayed into the search, never probed again), training goes on from the checkpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.reports.run_outputs import write_outputs
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import resume_run

JOB: dict[str, Any] = {
    "name": "flow-resume",
    "model": {"name": "logistic-regression"},
    "dataset": {"synthetic": "higgs-like", "samples": 1000, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "batch_size": 32,
    "seed": 0,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
    "training": {"max_epochs": 4},
    "workflow": {
        "batch_size_schedule": {0: 32, 2: 128},
        "search": {
            "max_probes": 2,
            "retrigger_probes": 2,
            "max_functions": 2,
            "probe_rounds": 2,
            "ei_threshold": 0.0,
        },
    },
}

# The run to kill: it kills itself (SIGKILL) right after the save at which the condition
# first holds (not the saves within a probe), so the kill point is known whatever the
# machine's speed.
KILLED_RUN = """
import os, signal, sys
from faasml.job import load_job
from faasml.runtime.coordinator import CoordinatorOptions
from faasml.runtime.runs.workflow import WorkflowRun
from faasml.types import Constraint

WHEN = sys.argv[3]

class Killed(WorkflowRun):
    probing = False

    def _measure(self, *args):
        self.probing = True
        try:
            return super()._measure(*args)
        finally:
            self.probing = False

    def save(self):
        super().save()
        if self.probing:
            return
        flow = self.record.workflow
        current = None if flow is None else flow.current
        if current is None or current.index != 2:
            return
        if WHEN == "mid-search" and len(current.probes) == 1 and current.choice is None:
            os.kill(os.getpid(), signal.SIGKILL)
        if WHEN == "mid-phase" and self.trials[0].epochs_done == 3:
            os.kill(os.getpid(), signal.SIGKILL)

# One epoch per segment, so that a phase of two epochs has a save between them.
options = CoordinatorOptions(epochs_per_segment=1)
run = Killed(load_job(sys.argv[1]), Constraint(budget_usd=1.0), sys.argv[2], options=options)
run.plan()
run.execute()
"""


@pytest.mark.parametrize("when", ["mid-search", "mid-phase"])
def test_a_killed_workflow_run_resumes_with_nothing_lost(tmp_path: Path, when: str) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(JOB))
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(job_file), str(run_dir), when],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    killed = json.loads((run_dir / "record.json").read_text())
    assert killed["status"] == "running"
    before = killed["workflow"]
    assert len(before["phases"]) == 1 and before["current"]["index"] == 2

    resumed = record_to_json(resume_run(run_dir, outputs=write_outputs).execute())

    assert resumed["status"] == "finished"
    history = resumed["trials"][0]["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3, 4]
    assert [h["batch_size"] for h in history] == [32, 32, 128, 128]
    flow = resumed["workflow"]
    assert "current" not in flow
    first, second = flow["phases"]
    assert first == before["phases"][0]  # the finished phase, untouched
    assert second["retrigger"] and second["epochs"] == 2
    # What was probed before the kill is kept and not probed again; nothing billed is lost.
    kept = before["current"]["probes"]
    assert second["probes"][: len(kept)] == kept
    assert resumed["charges"][: len(killed["charges"])] == killed["charges"]
    later = resumed["charges"][len(killed["charges"]) :]
    searches = [c for c in later if c["kind"] == "search"]
    if when == "mid-phase":  # its search had finished: the same choice, no probe after it
        assert second["choice"] == before["current"]["choice"]
        assert second["probes"] == kept and not searches
        assert [h["epoch"] for h in second["epochs_run"]] == [3, 4]
    else:  # the search goes on with the probe it had left
        assert len(second["probes"]) == 2 and searches
    # The run's clock went on across the kill: the phases' events are in order.
    times = [e["t_s"] for e in resumed["events"] if e["text"].startswith("phase")]
    assert times == sorted(times) and len(times) >= 3
    assert "Deployment search" in (run_dir / "report.md").read_text()
