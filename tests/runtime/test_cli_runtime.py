"""`faasml train`, `faasml profile` and `faasml resume` through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main
from faasml.workload import load_workload

JOB = {
    "name": "tiny-train",
    "model": {"name": "logistic-regression", "l2": 0.0001},
    "dataset": {"synthetic": "higgs-like", "samples": 1200, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9},
    "training": {"target_loss": 0.3, "max_epochs": 3},
    "batch_size": 100,
    "seed": 0,
}


def _job(folder: Path) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    return path


def test_train_that_misses_its_target_says_so_and_resume_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    assert main(["train", str(_job(tmp_path)), "--deadline", "10m", "--run-dir", str(run_dir)]) == 1
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "target-missed"  # not "finished": 0.3 was never reached
    assert record["target"]["reached"] is False
    assert "TARGET MISSED" in capsys.readouterr().out
    assert "target-missed" in (run_dir / "report.md").read_text()
    history = record["trials"][0]["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]  # 0.3 is out of reach: max_epochs stops it
    assert history[-1]["val_loss"] < history[0]["val_loss"] * 1.5
    assert main(["resume", str(run_dir)]) == 2


def test_profile_writes_a_profile_the_planners_read(tmp_path: Path) -> None:
    out = tmp_path / "profile"
    code = main(
        [
            "profile",
            str(_job(tmp_path)),
            "--out",
            str(out),
            "--counts",
            "2",
            "--rounds",
            "3",
        ]
    )
    assert code == 0
    workload = load_workload(out / "workload.yaml")
    # sizes from the job's measured footprint: the least that fits, and one vCPU's worth
    assert workload.compute.kind == "table" and 1 <= len(workload.compute.points) <= 2
    assert yaml.safe_load((out / "catalog.yaml").read_text())["platform"]["cold_start_s"] > 0


def test_profile_refuses_bad_memories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(_job(tmp_path)), "--memories", "big"]) == 2
    # no function of the job fits in 32 MB (Python and numpy alone are more): the footprint
    # rule names itself (64 MB fits since a function no longer imports the planners)
    assert main(["profile", str(_job(tmp_path)), "--memories", "32"]) == 2
    assert "measured footprint" in capsys.readouterr().err
