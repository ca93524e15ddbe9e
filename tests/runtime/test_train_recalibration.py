"""A training run with a target loss re-calibrates as it goes: after epochs 2, 4, 8, … the
epochs it ran correct the model, the rest of the run is re-predicted from them, and the
console, record and report show it beside the first prediction and the measurement."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
import yaml

from faasml.cli.main import main

from .test_outcomes import JOB as OUTCOMES_JOB

MAX_EPOCHS = 5

JOB: dict[str, Any] = {
    **OUTCOMES_JOB,
    "name": "recalibrated-train",
    # Far below what logistic regression reaches here (about 0.6): every epoch runs.
    "training": {"max_epochs": MAX_EPOCHS, "target_loss": 0.01},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, str]:
    folder = tmp_path_factory.mktemp("recalibrated")
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    run_dir = folder / "run"
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        main(["train", str(path), "--deadline", "10m", "--run-dir", str(run_dir)])
    record = json.loads((run_dir / "record.json").read_text())
    return record, console.getvalue(), (run_dir / "report.md").read_text()


def test_the_rest_is_re_predicted_after_epochs_two_and_four(
    trained: tuple[dict[str, Any], str, str],
) -> None:
    record, _, _ = trained
    assert record["trials"][0]["epochs_done"] == MAX_EPOCHS
    repredictions = record["plan"]["repredictions"]
    assert [r["epoch"] for r in repredictions] == [2, 4]
    history = record["trials"][0]["history"]
    for r in repredictions:
        assert r["rest_epochs"] == MAX_EPOCHS - r["epoch"]
        assert r["rest_time_s"] > 0 and r["rest_cost_usd"] > 0
        # Made when that epoch had ended, with what had been spent by then.
        assert r["at_s"] >= history[r["epoch"] - 1]["t_s"]
        assert 0 < r["spent_usd"] < record["plan"]["stages"][0]["measured_cost_usd"]
    assert repredictions[0]["at_s"] < repredictions[1]["at_s"]
    assert record["calibration"]  # the corrections, for a resumed run


def test_the_stage_holds_the_prediction_the_last_re_prediction_and_the_measurement(
    trained: tuple[dict[str, Any], str, str],
) -> None:
    record, _, _ = trained
    stage = record["plan"]["stages"][0]
    last = record["plan"]["repredictions"][-1]
    assert stage["predicted_time_s"] == pytest.approx(record["plan"]["time_s"])
    assert stage["repredicted_time_s"] == pytest.approx(last["at_s"] + last["rest_time_s"])
    assert stage["repredicted_cost_usd"] == pytest.approx(last["spent_usd"] + last["rest_cost_usd"])
    # Measured when the last epoch had ended, before the run closed its functions.
    last_epoch = record["trials"][0]["history"][-1]
    assert last_epoch["t_s"] <= stage["measured_time_s"] <= record["elapsed_s"]
    profiling = sum(c["usd"] for c in record["charges"] if c["kind"] == "profiling")
    run_bill = sum(c["usd"] for c in record["charges"]) - profiling
    assert stage["measured_cost_usd"] == pytest.approx(run_bill, rel=1e-6)


def test_the_console_and_report_show_the_re_prediction(
    trained: tuple[dict[str, Any], str, str],
) -> None:
    _, out, report = trained
    assert "re-predicted after epoch 4:" in out
    assert "Re-predicted during the run" in report
    rows = [line for line in report.splitlines() if line.startswith("| 2 |")]
    assert rows and f"| {MAX_EPOCHS - 2} ({MAX_EPOCHS - 2}) |" in rows[0]
