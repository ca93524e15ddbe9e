from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from faasml.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_train_prints_the_plan_and_breakdown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "train", "lr-higgs", "--budget", "$0.10")
    assert code == 0
    assert "Plan:" in out and "functions" in out
    assert "synchronisation" in out and "Runners-up" in out


def test_plan_train_json_is_documented_and_within_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, "plan", "train", "mobilenet-cifar10", "--deadline", "45m", "--json", "--epochs", "5"
    )
    assert code == 0
    data = json.loads(out)
    assert data["kind"] == "train-plan" and data["format"] == 1
    assert data["epochs"] == 5
    assert data["constraint"] == {"budget_usd": None, "deadline_s": 2700.0, "objective": "min-cost"}
    assert data["total"]["time_s"] <= 2700
    assert set(data["allocation"]) == {"n", "memory_mb", "storage", "scheme"}
    parts = data["total"]
    assert parts["cost_usd"] == pytest.approx(
        parts["function_usd"] + parts["invocation_usd"] + parts["storage_usd"]
    )
    assert data["space"]["frontier"] <= data["space"]["evaluated"]


def test_infeasible_budget_exits_2_with_least_budget(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "plan", "train", "lr-higgs", "--budget", "0.0000001")
    assert code == 2
    assert "least budget that works is $" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "train", "lr-higgs", "--budget", "lots"], "the value of --budget is 'lots'"),
        (["plan", "train", "lr-higgs", "--deadline", "soon"], "the value of --deadline is 'soon'"),
        (["plan", "train", "lr-higgs"], "give --budget, --deadline or both"),
        (["plan", "train", "nope", "--budget", "1"], "unknown workload 'nope'"),
        (["plan", "train", "lr-higgs", "--budget", "1", "--catalog", "gcp"], "unknown catalog"),
        (["plan", "train", "lr-higgs", "--budget", "1", "--storages", "gcs"], "no storage 'gcs'"),
        (["plan", "train", "lr-higgs", "--budget", "1", "--memory-step", "0"], "--memory-step"),
        (["plan", "train", "lr-higgs", "--budget", "1", "--epochs", "0"], "epochs >= 1"),
        (["plan", "fly"], "invalid choice"),
    ],
)
def test_bad_values_name_the_value_and_rule(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in " ".join(err.split())


def test_bad_profile_file_names_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    profile = tmp_path / "job.yaml"
    profile.write_text("format: 1\nname: x\nmodel: y\n")
    code, _, err = run(capsys, "plan", "train", str(profile), "--budget", "1")
    assert code == 2
    assert "dataset is missing" in err


def test_console_script_runs_on_the_local_catalog() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "faasml.cli.main",
            "plan",
            "train",
            "lr-higgs",
            "--catalog",
            "local",
            "--deadline",
            "1h",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["catalog"] == "local"
    allocation = data["allocation"]
    # One function synchronises nothing; more use the local catalog's one store.
    assert allocation["storage"] == ("none" if allocation["n"] == 1 else "embedded")
