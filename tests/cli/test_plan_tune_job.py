"""`faasml plan tune JOB.yaml` plans the job `faasml tune JOB.yaml` runs: the same stages
(trials and epochs each), and from the job's cached measured profile the same allocations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faasml.cli.main import main
from faasml.job import load_job
from faasml.runtime.coordinator import CoordinatorOptions
from faasml.runtime.coordinator.estimates import coordinator_seconds
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.types import Constraint

JOB = Path(__file__).resolve().parents[2] / "examples" / "tune-logreg.yaml"


def _shape(stages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(s["trials"], s["epochs"]) for s in stages]


def _allocations(stages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """n and memory of each stage as the planner planned it (a run may then move a stage to the
    size its warm functions have: ``planned_allocation`` keeps the planner's), and the store
    and scheme where n > 1 (one function synchronises nothing: plan tune's JSON says "none")."""
    out = []
    for stage in stages:
        a = stage.get("planned_allocation") or stage["allocation"]
        out.append((a["n"], a["memory_mb"], *((a["storage"], a["scheme"]) if a["n"] > 1 else ())))
    return out


def _plan_tune(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["plan", "tune", str(JOB), "--budget", "0.05", "--json"]) == 0
    planned: dict[str, Any] = json.loads(capsys.readouterr().out)
    return planned


@pytest.mark.slow
def test_plan_tune_of_a_job_file_is_the_plan_its_run_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FAASML_CACHE", str(cache))
    monkeypatch.setenv("FAASML_PROFILE_RECHECK", "0")  # the cached profile as it was measured
    unmeasured = _plan_tune(capsys)  # no profile cached yet: the job's named profile
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = ["tune", str(JOB), "--budget", "0.05", "--run-dir", str(tmp_path / "R")]
    done = subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", *command],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "R" / "record.json").read_text())
    assert record["status"] == "finished"
    measured = _plan_tune(capsys)  # the run measured the job and cached its profile
    run_shape = _shape(record["plan"]["stages"])
    assert run_shape == _shape(unmeasured["stages"]) == _shape(measured["stages"])
    assert run_shape == [(16, 1), (8, 1), (4, 1), (2, 1)]
    # A run planned from the cached profile chooses what plan tune chose from it.
    run = TuneRun(load_job(JOB), Constraint(budget_usd=0.05), tmp_path / "again")
    # The coordinator's seconds between invocations as plan tune prices them: the run would
    # time a record write on this machine, a reading no test may depend on.
    run.record.coordinator_s = coordinator_seconds([], [], CoordinatorOptions().poll_s)
    run.plan()
    again = record_to_json(run.record)["plan"]
    assert again["workload"] == "measured"
    assert _shape(again["stages"]) == run_shape
    assert _allocations(again["stages"]) == _allocations(measured["stages"])
    # The run shows the planner's plan as planned (its bill; its time differs only by the
    # coordinator's seconds the run measures as it starts), its own prediction beside it.
    assert again["cost_usd"] == pytest.approx(measured["cost_usd"], rel=1e-9)
    for ran, planned in zip(again["stages"], measured["stages"], strict=True):
        assert ran["cost_usd"] == pytest.approx(planned["cost_usd"], rel=1e-9)
    assert again["predicted_cost_usd"] == pytest.approx(
        sum(s["predicted_cost_usd"] for s in again["stages"])
    )
    assert measured["catalog"] == "local" and measured["workload"] == "tune-logreg"
