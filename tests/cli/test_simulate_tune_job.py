"""`faasml simulate tune JOB.yaml`: the job's real tuning run on the simulated platform, shown
like a replayed plan (stages simulated beside predicted, the verdict on the constraint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faasml.cli.main import main

JOB = str(Path(__file__).resolve().parents[2] / "examples" / "tune-logreg.yaml")


def test_a_job_file_runs_its_tuning_run_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "tune", JOB, "--budget", "0.05", "--seed", "4", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["stages"] == first["stages"] and again["time_s"] == first["time_s"]
    assert first["kind"] == "tune-simulation" and first["status"] == "finished"
    planned = first["plan"]["stages"]
    assert [s["trials"] for s in first["stages"]] == [s["trials"] for s in planned]
    assert planned[0]["trials"] == 16 and first["best"] is not None
    assert 0 < first["cost_usd"] <= 0.05 and first["within_constraint"]
    assert sum(s["cost_usd"] for s in first["stages"]) <= first["cost_usd"] + 1e-12
    assert first["time_error"] == pytest.approx(
        first["time_s"] / first["plan"]["predicted"]["time_s"] - 1, rel=1e-9
    )


def test_without_noise_the_run_meets_its_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "tune", JOB, "--budget", "0.05", "--noise", "0"]
    assert main([*argv, "--cold-start-noise", "0"]) == 0
    out = capsys.readouterr().out
    assert "its tuning run on the simulated platform" in out
    assert "Stages: simulated (predicted)" in out and "within the constraint" in out
    errors = json.loads(_json(capsys, [*argv, "--cold-start-noise", "0"]))
    assert abs(errors["time_error"]) < 0.05 and abs(errors["cost_error"]) < 0.05


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main([*argv, "--json"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--trials", "4"], "--trials set the tuning job, but"),
        (["--memory-step", "128"], "the value of --memory-step is 128, but"),
        (["--seed", "-1"], "the value of --seed is -1"),
        (["--noise", "-1"], "the value of noise is -1"),
    ],
)
def test_bad_options_with_a_job_file_get_one_line(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "tune", JOB, "--budget", "0.05", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_job_without_tuning_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    train = JOB.replace("tune-logreg", "train-logreg")
    assert main(["simulate", "tune", train, "--budget", "0.05"]) == 2
    assert "no tuning section" in capsys.readouterr().err
