"""Where a user meets the deployment search: a tuning job's ``workflow:`` (refused in one line
by ``faasml job check`` and ``faasml tune``) and ``planner: search`` in a training job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main

EXAMPLES = Path(__file__).parents[2] / "examples"


def tuning_with_workflow(tmp_path: Path) -> Path:
    data = yaml.safe_load((EXAMPLES / "tune-logreg.yaml").read_text())
    data["workflow"] = {"batch_size_schedule": {0: 32, 1: 128}}
    path = tmp_path / "tune-flow.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("command", [["job", "check"], ["tune", "--budget", "0.05"]])
def test_a_tuning_job_with_a_workflow_is_refused_in_one_line(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tuning_with_workflow(tmp_path)
    args = [*command, str(path)]
    if command[0] == "tune":
        args += ["--run-dir", str(tmp_path / "run")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "workflow" in err and "tuning" in err
    assert not (tmp_path / "run").exists()  # refused before anything ran


def training_job(tmp_path: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "name": "searched",
        "model": {"name": "logistic-regression"},
        "dataset": {"synthetic": "higgs-like", "samples": 2000, "test_fraction": 0.2},
        "optimizer": {"name": "sgd", "lr": 0.1},
        "batch_size": 64,
        "training": {"max_epochs": 1},
        "platform": "local",
        "store": "embedded",
        "catalog": "local",
        **changes,
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_planner_search_in_a_training_job_runs_the_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    search = {"max_probes": 2, "max_functions": 2, "probe_rounds": 1}
    path = training_job(tmp_path, planner="search", search=search)
    folder = tmp_path / "run"
    assert main(["train", str(path), "--budget", "1", "--run-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Plan (search (gp-ei" in " ".join(out.split())
    record = json.loads((folder / "record.json").read_text())
    assert record["status"] == "finished"
    (phase,) = record["workflow"]["phases"]
    assert phase["searched"] and 1 <= len(phase["probes"]) <= 2
    assert any(c["kind"] == "search" and c["usd"] > 0 for c in record["charges"])
    assert record["job"]["planner"] == "search"


def test_planner_search_is_refused_for_a_tuning_job_and_search_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = yaml.safe_load((EXAMPLES / "tune-logreg.yaml").read_text())
    data["planner"] = "search"
    tune = tmp_path / "tune.yaml"
    tune.write_text(yaml.safe_dump(data))
    assert main(["job", "check", str(tune)]) == 2
    assert "planner is 'search'" in capsys.readouterr().err
    lone = training_job(tmp_path, search={"max_probes": 2})
    assert main(["job", "check", str(lone)]) == 2
    assert "planner: search" in capsys.readouterr().err
    wrong = training_job(tmp_path, planner="exhaustive")
    assert main(["job", "check", str(wrong)]) == 2
    assert "model, search" in capsys.readouterr().err


def test_no_probe_fitting_the_search_dollars_runs_the_models_choice_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    search = {"max_probes": 2, "max_functions": 2, "max_usd": 1e-12}
    path = training_job(tmp_path, planner="search", search=search)
    folder = tmp_path / "run"
    assert main(["train", str(path), "--budget", "1", "--run-dir", str(folder)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    record = json.loads((folder / "record.json").read_text())
    assert record["status"] == "finished"
    (phase,) = record["workflow"]["phases"]
    assert phase["probes"] == [] and not any(c["kind"] == "search" for c in record["charges"])
    reason = phase["stop_reason"]
    assert reason.startswith("no probe fits the search budget ($1e-12; the cheapest probe costs")
    assert reason.endswith("the model's choice, unmeasured")
    assert f"Deployment search, phase 1: {reason}" in out
    assert any(reason in e["text"] for e in record["events"])
