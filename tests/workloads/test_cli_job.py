"""`faasml job check`: a real job file through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.job import parse_assignments

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_check_prints_the_job_and_its_trials(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["job", "check", str(EXAMPLES / "tune-logreg.yaml"), "--set", "tuning.trials=4"])
    out = capsys.readouterr().out
    assert code == 0
    assert "tune-logreg is valid" in out and "29 parameters" in out
    assert "4 trials" in out and "trial 3:" in out and "trial 4:" not in out


def test_check_names_the_stores_the_planner_may_choose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "stores.redis=redis://127.0.0.1:6379/0"
    assert main(["job", "check", str(EXAMPLES / "train-logreg.yaml"), "--set", url]) == 0
    assert "the planner chooses among: embedded, redis" in capsys.readouterr().out


def test_check_as_json_agrees_with_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "train-logreg.yaml"
    assert main(["job", "check", str(path), "--json", "--set", "batch_size=32"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["job"]["batch_size"] == 32
    assert summary["data"]["train_samples"] + summary["data"]["test_samples"] == 50_000
    assert summary["model"]["params"] == 29 and summary["trials"] == []


def test_check_reports_the_bad_field_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "train-logreg.yaml"
    assert main(["job", "check", str(path), "--set", "optimizer.momentum=1"]) == 2
    assert "optimizer.momentum is 1, but must be in [0, 1)" in capsys.readouterr().err


def test_assignments_are_read_as_yaml() -> None:
    assert parse_assignments(["a.b=8", "c=[1, 2]", "d=text", "e=0.5", "f="]) == {
        "a.b": 8,
        "c": [1, 2],
        "d": "text",
        "e": 0.5,
        "f": None,
    }
    for bad in ("novalue", "=3", "a..b=1"):
        with pytest.raises(ConfigError, match="FIELD=VALUE"):
            parse_assignments([bad])
