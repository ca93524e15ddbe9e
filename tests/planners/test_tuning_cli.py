from __future__ import annotations

import json
from pathlib import Path

import pytest

from faasml.cli.main import main

JOB = ["--trials", "256", "--memory-step", "512"]


def test_plan_tune_json_lists_stages_and_savings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "tune", "lr-higgs", *JOB, "--budget", "2.00", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "tune-plan"
    assert data["planner"] == "exact"
    assert [s["trials"] for s in data["stages"]] == [256 // 2**i for i in range(8)]
    assert data["cost_usd"] <= 2.00
    assert sum(s["share_of_budget"] for s in data["stages"]) == pytest.approx(
        data["cost_usd"] / 2.00
    )
    compared = data["compared"]
    assert set(compared) == {
        "greedy",
        "static",
        "static-cheapest",
        "fixed",
        "fixed-pool",
        "even-trials",
    }
    for name in ("static", "static-cheapest"):
        assert compared[name]["saving"] >= -1e-9


def test_plan_tune_table_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["plan", "tune", "mobilenet-cifar10", *JOB, "--deadline", "3h", "--plot", str(tmp_path)]
    )
    assert code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "cheapest within deadline 3h" in out
    assert "static-cheapest" in out
    for name in ("budget_share.png", "tradeoff.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budget", "0.0001"], "least budget that works"),
        (["--budget", "1", "--epochs-per-stage", "two"], "--epochs-per-stage is 'two'"),
        (["--budget", "1", "--reduction-factor", "1"], "reduction_factor is 1"),
        (["--budget", "1", "--planner", "magic"], "unknown tuning planner 'magic'"),
    ],
)
def test_plan_tune_errors_name_the_value(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "tune", "lr-higgs", *JOB, *extra]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_simulate_tune_reports_simulated_beside_predicted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["simulate", "tune", "lr-higgs", *JOB, "--budget", "2", "--seed", "3", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["time_s"], again["cost_usd"]) == (first["time_s"], first["cost_usd"])
    assert again["stages"] == first["stages"]
    assert first["kind"] == "tune-simulation"
    assert first["time_s"] == pytest.approx(first["plan"]["time_s"], rel=0.5)
    assert first["time_error"] == pytest.approx(
        first["time_s"] / first["plan"]["time_s"] - 1, rel=1e-9
    )
    quiet = ["simulate", "tune", "lr-higgs", *JOB, "--budget", "2"]
    quiet += ["--noise", "0", "--cold-start-noise", "0"]
    assert main(quiet) == 0
    assert "time +0.0%" in capsys.readouterr().out


def test_plan_tune_plans_every_hyperband_bracket(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "tune", "lr-higgs", "--hyperband", "27", "--reduction-factor", "3"]
    assert main([*argv, "--memory-step", "512", "--budget", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # Brackets s = 3, 2, 1, 0 have 4, 3, 2 and 1 stages.
    assert len(data["stages"]) == 10
    assert [s["trials"] for s in data["stages"][:4]] == [27, 9, 3, 1]
    assert main([*argv, "--trials", "8", "--budget", "5"]) == 2
    assert "not both" in capsys.readouterr().err
