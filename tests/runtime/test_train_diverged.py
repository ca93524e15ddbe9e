"""`faasml train` stops at the first epoch whose loss or metric turns NaN or infinite: one
console line, the record 'failed' with the epoch and the value, exit status 1, no epoch
trained (or billed) after it; a resume trains it no further."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.cli.main import main

# lr 1e7 sends the MLP's weights to NaN in its first epoch (as in test_diverged.py).
JOB: dict[str, Any] = {
    "name": "diverge-train",
    "model": {"name": "mlp", "hidden": [8]},
    "dataset": {"synthetic": "higgs-like", "samples": 600, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 1.0e7},
    "training": {"max_epochs": 4},
    "batch_size": 50,
    "seed": 3,
    "catalog": "local",
}


def _cli(args: list[str]) -> tuple[int, str]:
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        code = main(args)
    return code, console.getvalue()


@pytest.fixture(scope="module")
def diverged(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    folder = tmp_path_factory.mktemp("diverged")
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    run_dir = folder / "run"
    code, out = _cli(["train", str(path), "--budget", "0.05", "--run-dir", str(run_dir)])
    return code, out, run_dir


def test_a_diverged_training_run_stops_at_that_epoch_and_fails(
    diverged: tuple[int, str, Path],
) -> None:
    code, out, run_dir = diverged
    assert code == 1
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "failed"
    assert record["events"][-1]["text"] == "diverged at epoch 1 (loss nan)"  # the reason
    trial = record["trials"][0]
    # trained no further: not the other three epochs the job allows
    assert trial["epochs_done"] == 1 and len(trial["history"]) == 1
    assert trial["status"] == "diverged" and trial["diverged_epoch"] == 1
    assert "best" not in record
    # one line says so on the console, and nothing ranks a run of one trial
    lines = [line for line in out.splitlines() if "diverged at epoch 1 (loss nan)" in line]
    assert len(lines) == 1, out
    assert "ranked last" not in out
    assert (run_dir / "report.md").exists()


def test_a_diverged_training_run_resumes_to_the_same_failure_without_training(
    diverged: tuple[int, str, Path],
) -> None:
    _, _, run_dir = diverged
    before = json.loads((run_dir / "record.json").read_text())
    code, _ = _cli(["resume", str(run_dir)])
    after = json.loads((run_dir / "record.json").read_text())
    assert code == 1 and after["status"] == "failed"
    assert after["trials"][0]["epochs_done"] == 1
    assert len(after["charges"]) == len(before["charges"])
