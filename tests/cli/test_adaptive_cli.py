from __future__ import annotations

import json
from pathlib import Path

import pytest

from faasml.cli.main import main
from faasml.sim.curves import CurvePoint, write_curve
from faasml.sim.synthetic import synthetic_curve

SMALL = ["--memory-step", "512", "--max-functions", "60"]


def test_simulate_train_prints_the_timeline_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            "train",
            "mobilenet-cifar10",
            "--family",
            "inverse",
            "--true-epochs",
            "20",
            "--offline-epochs",
            "12",
            "--budget",
            "5",
            "--compare",
            "static,no-delay",
            "--json",
            *SMALL,
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    runs = {run["policy"]: run for run in data["runs"]}
    assert set(runs) == {"adaptive", "static", "no-delay"}
    adaptive = runs["adaptive"]
    assert adaptive["kind"] == "train-simulation" and adaptive["offline_epochs"] == 12
    assert adaptive["cost_usd"] <= 5.0 and not adaptive["violated"]
    timeline = adaptive["timeline"]
    assert timeline[-1]["decision"] == "stop"
    assert {"epoch", "loss", "prediction", "decision", "allocation", "spent_usd"} <= set(
        timeline[0]
    )


def test_simulate_train_table_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = synthetic_curve("exponential", 0.2, 25.0, noise=0.0)
    curve = write_curve(
        tmp_path / "run.csv", [CurvePoint(k, float(source.mean(k))) for k in range(1, 40)]
    )
    code = main(
        [
            "simulate",
            "train",
            "mobilenet-cifar10",
            "--curve",
            str(curve),
            "--deadline",
            "2h",
            "--plot",
            str(tmp_path / "plots"),
            *SMALL,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Re-planning timeline" in out and "reached the target" in out
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "adaptive-allocation.png",
        "adaptive-loss.png",
    ]


def test_simulate_train_errors_are_clear(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "simulate",
                "train",
                "lr-higgs",
                "--family",
                "step",
                "--budget",
                "1",
                "--policy",
                "optimus",
            ]
        )
        == 2
    )
    assert "unknown training policy 'optimus'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "train", "lr-higgs", "--budget", "1"])  # needs --curve or --family


def test_plan_train_with_a_target_loss_uses_the_offline_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = synthetic_curve("inverse", 0.66, 17.5, noise=0.0)
    sample = write_curve(
        tmp_path / "sample.csv", [CurvePoint(k, float(source.mean(k))) for k in range(1, 9)]
    )
    code = main(
        [
            "plan",
            "train",
            "lr-higgs",
            "--target-loss",
            "0.66",
            "--sample-curve",
            str(sample),
            "--budget",
            "2",
            "--json",
            *SMALL,
        ]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out)["epochs"] == 18
    assert main(["plan", "train", "lr-higgs", "--target-loss", "0.66", "--budget", "2"]) == 2
    assert "--sample-curve" in capsys.readouterr().err
    assert main(["plan", "train", "lr-higgs", "--budget", "2", "--json", *SMALL]) == 0
    assert json.loads(capsys.readouterr().out)["epochs"] == 10
