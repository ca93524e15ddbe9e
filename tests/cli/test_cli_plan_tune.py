"""`faasml plan tune` end to end: constraints, errors and machine-readable output."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from faasml.cli.main import main

JOB = ["--trials", "256", "--memory-step", "512"]


@pytest.mark.parametrize(
    ("bound", "goal"), [(["--budget", "5"], "cost"), (["--deadline", "1h"], "time")]
)
def test_minimise_what_the_single_bound_does_not_limit(
    bound: list[str], goal: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "tune", "lr-higgs", *JOB, *bound, "--minimise", goal]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["constraint"]["objective"] == f"min-{goal}"
    compared = data["compared"]
    for name in ("fixed", "even-trials", "static-cheapest"):
        assert "infeasible" not in compared[name], name
    assert main([*argv, "--plot", str(tmp_path)]) == 0
    assert (tmp_path / "tradeoff.png").read_bytes().startswith(b"\x89PNG")
    umask = os.umask(0o022)
    os.umask(umask)
    # Readable by others as any file the user keeps (0644 under the usual umask), no temporary.
    assert stat.S_IMODE((tmp_path / "tradeoff.png").stat().st_mode) == 0o666 & ~umask
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_plot_folder_that_cannot_be_made_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "taken.png"
    a_file.write_text("not a folder")
    for value, reason in (
        (str(a_file), "names an existing file"),
        (str(a_file / "below"), "Not a directory"),
        ("/proc/nope", "No such file or directory"),
    ):
        argv = ["plan", "tune", "lr-higgs", *JOB, "--budget", "5", "--plot", value]
        assert main(argv) == 2, value
        err = capsys.readouterr().err
        assert f"the value of --plot is '{value}'" in " ".join(err.split())
        assert reason in " ".join(err.split())
        assert "Traceback" not in err
    assert a_file.read_text() == "not a folder"


def test_a_job_needs_trials_or_hyperband(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "tune", "lr-higgs", "--budget", "60"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "needs --trials N (successive halving) or --hyperband MAX_EPOCHS" in err
    assert "not both" not in err


def test_one_function_json_says_nothing_is_synchronised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A loose deadline: the cheapest plan trains on one function per trial.
    argv = ["plan", "tune", "lr-higgs", *JOB, "--deadline", "10h"]
    assert main([*argv, "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    single = [s["allocation"] for s in stages if s["allocation"]["n"] == 1]
    assert single, "expected a one-function stage"
    for allocation in single:
        assert (allocation["storage"], allocation["scheme"]) == ("none", "none")
    for stage in stages:
        assert isinstance(stage["allocation"]["storage"], str)
        assert isinstance(stage["allocation"]["scheme"], str)


def test_one_function_train_plan_json_agrees_with_its_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "train", "lr-higgs", "--deadline", "10h"]
    assert main(argv) == 0
    assert "no synchronisation (one function)" in capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    allocation = json.loads(capsys.readouterr().out)["allocation"]
    assert allocation["n"] == 1
    assert (allocation["storage"], allocation["scheme"]) == ("none", "none")
