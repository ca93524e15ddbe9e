"""`faasml tune` end to end; a killed coordinator is resumed with nothing lost."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.cli.main import main
from faasml.job import load_job
from faasml.runtime.coordinator import CoordinatorOptions
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun, resume_run
from faasml.sim.curves import read_curve
from faasml.types import Constraint

from .tiny_jobs import four_trial_tune_job

JOB = four_trial_tune_job("tiny-tune", epochs_per_stage=1)


def _job_file(folder: Path) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    return path


def test_tune_command_writes_record_report_curves_and_plots(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code = main(["tune", str(_job_file(tmp_path)), "--budget", "0.05", "--run-dir", str(run_dir)])
    assert code == 0
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "finished"
    assert record["best"]["trial"] in range(4)
    assert [t["status"] for t in record["trials"]].count("done") == 2  # 4 trials, η = 2
    spent = sum(c["usd"] for c in record["charges"])
    assert 0 < spent <= 0.05
    report = (run_dir / "report.md").read_text()
    assert "Plan against actual" in report
    # The run's own work between its two stages is priced (as its planning took) and measured.
    plan = record["plan"]
    stages = plan["stages"]
    assert plan["between_stages_s"] > 0
    assert plan["predicted_time_s"] == pytest.approx(
        sum(s["predicted_time_s"] for s in stages) + plan["between_stages_s"]
    )
    # The plan's own figures stay the planner's: the run's prediction stands beside them.
    assert plan["time_s"] == pytest.approx(sum(s["time_s"] for s in stages))
    assert plan["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in stages))
    assert plan["predicted_cost_usd"] == pytest.approx(sum(s["predicted_cost_usd"] for s in stages))
    assert stages[0]["measured_between_s"] > 0
    assert "Between stages (ranking, re-calibration, re-planning, the record)" in report
    curve = read_curve(run_dir / "curves" / f"trial-{record['best']['trial']}.csv")
    assert len(curve.points) == 2
    assert (run_dir / "plots" / "loss.png").exists()


# The coordinator to kill: `faasml tune` with a worker of trial 3 that hangs in its first
# epoch, so the run is still running, whatever the machine's speed, when the test kills it
# (the test once killed a run that had already finished: 'finished' == 'running').
KILLED_RUN = """
import sys
from faasml.job import load_job
from faasml.runtime.coordinator import CoordinatorOptions, TrialFault
from faasml.runtime.runs.session import TuneRun
from faasml.runtime.function.worker import Fault
from faasml.types import Constraint
from faasml.runtime.record.codec import record_to_json

hang = TrialFault(3, 0, Fault(worker_id=0, round_id=1, during="hang"))
options = CoordinatorOptions(silent_after_s=3600, epochs_per_segment={segment})
run = TuneRun(load_job(sys.argv[1]), Constraint(budget_usd=0.05), sys.argv[2], faults=[hang],
              options=options)
run.plan()
run.execute()
"""


def _far_enough(state: dict[str, Any], epochs_per_stage: int) -> bool:
    """Two epochs committed, and a trial through its first stage: with stages of several
    epochs, that trial's second segment trained more than one."""
    done = [t["epochs_done"] for t in state["trials"]]
    return sum(done) >= 2 and max(done) >= epochs_per_stage


@pytest.mark.parametrize(
    ("epochs_per_stage", "epochs_per_segment"),
    [(1, None), (3, 3)],
    ids=["one-epoch-segments", "several-epoch-segments"],
)
def test_killed_coordinator_resumes_with_nothing_lost(
    tmp_path: Path, epochs_per_stage: int, epochs_per_segment: int | None
) -> None:
    job_file = tmp_path / "job.yaml"
    job = four_trial_tune_job("tiny-tune", epochs_per_stage=epochs_per_stage)
    job_file.write_text(yaml.safe_dump(job))
    options = CoordinatorOptions(epochs_per_segment=epochs_per_segment)
    clean = TuneRun(
        load_job(job_file), Constraint(budget_usd=0.05), tmp_path / "clean", options=options
    )
    clean.plan()
    expected = record_to_json(clean.execute())
    if epochs_per_segment is not None:  # some epoch was trained inside a longer segment
        assert any(h["invocations"] == 0 for t in expected["trials"] for h in t["history"])

    run_dir = tmp_path / "killed"
    err_path = tmp_path / "killed.stderr"
    script = KILLED_RUN.replace("{segment}", repr(epochs_per_segment))
    with err_path.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-c", script, str(job_file), str(run_dir)],
            stdout=subprocess.DEVNULL,
            stderr=err,  # its functions' output too: they inherit it
        )
    record = run_dir / "record.json"
    deadline = time.monotonic() + 300  # a hang detector: the loop ends on the record
    while time.monotonic() < deadline and process.poll() is None:
        if record.exists() and _far_enough(json.loads(record.read_text()), epochs_per_stage):
            break
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    state = json.loads(record.read_text())
    assert state["status"] == "running"
    assert _far_enough(state, epochs_per_stage)

    resumed = record_to_json(resume_run(run_dir).execute())
    assert resumed["status"] == "finished"
    for trial, clean_trial in zip(resumed["trials"], expected["trials"], strict=True):
        assert trial["status"] == clean_trial["status"]
        assert [h["epoch"] for h in trial["history"]] == [
            h["epoch"] for h in clean_trial["history"]
        ]
        for got, want in zip(trial["history"], clean_trial["history"], strict=True):
            assert abs(got["val_loss"] - want["val_loss"]) < 1e-6
    assert resumed["best"]["trial"] == expected["best"]["trial"]
    # Nothing the killed coordinator or its orphaned functions printed (issue 12: they
    # printed BrokenPipeError tracebacks).
    assert "Traceback" not in err_path.read_text()


def test_a_resumed_run_keeps_the_platform_the_command_line_chose(tmp_path: Path) -> None:
    job = dataclasses.replace(load_job(_job_file(tmp_path)), platform="ray")
    options = {"address": "10.0.0.5:6379", "log_to_driver": False}
    # Planned from the named profile (measure=False): no cluster is reached by this test.
    run = TuneRun(
        job, Constraint(budget_usd=0.05), tmp_path / "run", platform_options=options, measure=False
    )
    run.plan()  # writes the record; the job file itself still says platform: local
    resumed = resume_run(tmp_path / "run")
    assert resumed.job.platform == "ray"
    # The options the command line gave, plus what the platform adds for the job (a PyTorch
    # or worker preload), which the first run had too.
    assert options.items() <= resumed.platform_options.items()
    assert resumed.platform_options == run.platform_options
