"""`faasml plan tune` end to end: constraints, errors and machine-readable output."""

from __future__ import annotations

import json
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
