"""How a training run ends, through `faasml train`: a target loss not reached within max_epochs
is 'target-missed' (in the record, on the console, in the exit status), never 'finished'."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.cli.main import main

JOB: dict[str, Any] = {
    "name": "outcome-train",
    "model": {"name": "logistic-regression", "l2": 0.0001},
    "dataset": {"synthetic": "higgs-like", "samples": 1500, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9},
    "training": {"max_epochs": 2},
    "batch_size": 100,
    "seed": 0,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
}

UNREACHABLE = 0.01
"""Far below what logistic regression reaches on Higgs-like data (about 0.6)."""
REACHABLE = 5.0
"""Above the loss of an untrained model (ln 2 ≈ 0.69)."""


def _train(folder: Path, target: float) -> tuple[int, dict[str, Any], str]:
    """`faasml train` of JOB with ``target_loss``: (exit status, record, console text)."""
    job = {**JOB, "training": {**JOB["training"], "target_loss": target}}
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    run_dir = folder / "run"
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        code = main(["train", str(path), "--deadline", "10m", "--run-dir", str(run_dir)])
    return code, json.loads((run_dir / "record.json").read_text()), console.getvalue()


@pytest.fixture(scope="module")
def missed(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str]:
    return _train(tmp_path_factory.mktemp("missed"), UNREACHABLE)


def test_an_unreached_target_is_recorded_as_target_missed(
    missed: tuple[int, dict[str, Any], str],
) -> None:
    _, record, _ = missed
    assert record["status"] == "target-missed"
    assert record["outcome"] == "target-missed"
    history = record["trials"][0]["history"]
    assert [h["epoch"] for h in history] == [1, 2]  # ran to max_epochs
    target = record["target"]
    assert target["loss"] == UNREACHABLE and target["reached"] is False
    assert target["last"] == pytest.approx(history[-1]["val_loss"])
    assert target["last"] > UNREACHABLE
    assert any("not reached" in e["text"] for e in record["events"])
    assert record["trials"][0]["status"] == "done"  # the model is still kept
    assert record["best"]["checkpoint"]


def test_an_unreached_target_says_so_on_the_console(
    missed: tuple[int, dict[str, Any], str],
) -> None:
    _, _, out = missed
    assert "target-missed" in out
    assert "finished" not in out


def test_an_unreached_target_exits_non_zero(missed: tuple[int, dict[str, Any], str]) -> None:
    code, _, _ = missed
    assert code != 0


def test_a_reached_target_finishes_with_exit_zero(tmp_path: Path) -> None:
    code, record, out = _train(tmp_path, REACHABLE)
    assert record["status"] == "finished"
    assert "outcome" not in record
    assert record["target"]["reached"] is True
    assert record["target"]["last"] <= REACHABLE
    assert code == 0
    assert "finished" in out and "target-missed" not in out
