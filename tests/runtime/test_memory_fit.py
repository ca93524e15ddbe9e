"""A trial whose function runs out of memory moves up (×1.5 on the catalog's grid) and finishes:
real worker processes of the local platform, a PyTorch model forced onto too small a function."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.job import load_job
from faasml.runtime.coordinator import Coordinator, CoordinatorOptions
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TrainRun, TuneRun
from faasml.types import Constraint

pytest.importorskip("torch")

TOO_SMALL_MB = 192
"""Less than a function that imported torch holds; ×1.5 on the 64 MB grid is 320 MB."""
MOVED_MB = 320

CNN: dict[str, Any] = {
    "name": "memory-fit",
    "model": {"name": "mobilenet-small", "width": 8, "blocks": 2},
    "dataset": {"synthetic": "images", "samples": 300, "classes": 4, "test_fraction": 0.2},
    "optimizer": {"name": "adam", "lr": 0.003},
    "search_space": {"optimizer.lr": {"loguniform": [0.0003, 0.03]}},
    "tuning": {
        "trials": 2,
        "reduction_factor": 2,
        "epochs_per_stage": 1,
        "stages": 2,
        "metric": "loss",
    },
    "batch_size": 32,
    "seed": 0,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
    "profile": "mobilenet-cifar10",
}


class WatchedRun(TuneRun):
    """A tuning run that keeps its coordinator, to read its memory moves afterwards."""

    coordinator: Coordinator | None = None

    def _drive(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        super()._drive(coordinator)


def _forced(
    folder: Path, stages: tuple[int, ...], max_restarts: int = 3
) -> tuple[WatchedRun, dict[str, Any]]:
    """Plan from the named profile (no measurement), force the given stages onto too small a
    function, run to the end."""
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(CNN))
    run = WatchedRun(
        load_job(path),
        Constraint(deadline_s=600.0),
        folder / "run",
        options=CoordinatorOptions(max_restarts=max_restarts),
        measure=False,
    )
    plan = run.plan()
    assert run.record.profile is None and plan.workload != "measured"
    assert len(plan.stages) == 2
    for index in stages:
        stage = plan.stages[index]
        stage.allocation = dataclasses.replace(stage.allocation, memory_mb=TOO_SMALL_MB)
    return run, record_to_json(run.execute())


@pytest.fixture(scope="module")
def first_stage(tmp_path_factory: pytest.TempPathFactory) -> tuple[WatchedRun, dict[str, Any]]:
    # No restart allowed at all: a move that counted as one would fail the trial.
    return _forced(tmp_path_factory.mktemp("first"), (0,), max_restarts=0)


def test_a_trial_out_of_memory_moves_up_and_finishes(
    first_stage: tuple[WatchedRun, dict[str, Any]],
) -> None:
    run, record = first_stage
    assert record["status"] == "finished"
    assert run.coordinator is not None
    moves = run.coordinator.memory_moves
    assert sorted(moves) == [(0, TOO_SMALL_MB, MOVED_MB), (1, TOO_SMALL_MB, MOVED_MB)]
    for trial in record["trials"]:
        assert trial["status"] in ("done", "pruned")  # neither failed, with max_restarts 0
        assert len(trial["failures"]) == 1
        failure = trial["failures"][0]
        assert "out-of-memory" in failure and f"moved to {MOVED_MB} MB" in failure
        assert trial["history"][0]["memory_mb"] == MOVED_MB  # epoch 1 ran on the moved size
        # The record keeps the move: a resumed run restores it and does not start the trial
        # again where it cannot fit.
        assert trial["memory_mb"] == MOVED_MB
        assert TrialState.from_dict(trial).memory_mb == MOVED_MB
    assert sum(t["status"] == "done" for t in record["trials"]) == 1
    assert record["best"]["epochs"] == 2


def test_later_stages_keep_the_moved_memory(tmp_path: Path) -> None:
    run, record = _forced(tmp_path, (0, 1))
    assert record["status"] == "finished"
    assert run.coordinator is not None
    assert len(run.coordinator.memory_moves) == 2  # stage 2 did not run out again
    done = [t for t in record["trials"] if t["status"] == "done"]
    assert len(done) == 1
    assert len(done[0]["failures"]) == 1
    history = done[0]["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    assert history[0]["memory_mb"] == MOVED_MB
    assert history[1]["memory_mb"] >= MOVED_MB  # not the 192 MB stage 2 was planned on
    # A re-plan after stage 1 (the measured epochs moved the prediction) never puts stage 2
    # back below the size the trial was moved to.
    if record["plan"].get("replans"):
        assert record["plan"]["stages"][1]["allocation"]["memory_mb"] >= MOVED_MB


class WatchedTraining(TrainRun):
    """A training run that keeps its coordinator."""

    coordinator: Coordinator | None = None

    def _drive(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        super()._drive(coordinator)


def test_a_training_run_out_of_memory_moves_up_and_finishes(tmp_path: Path) -> None:
    spec = {key: value for key, value in CNN.items() if key not in ("search_space", "tuning")}
    spec["training"] = {"max_epochs": 2}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    run = WatchedTraining(
        load_job(path),
        Constraint(deadline_s=600.0),
        tmp_path / "run",
        options=CoordinatorOptions(max_restarts=0),
        measure=False,
    )
    run.plan()
    assert run.record.plan is not None and run.record.allocation is not None
    stage = run.record.plan.stages[0]
    stage.allocation = dataclasses.replace(stage.allocation, memory_mb=TOO_SMALL_MB)
    run.record.allocation = stage.allocation
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    assert run.coordinator is not None
    assert run.coordinator.memory_moves == [(0, TOO_SMALL_MB, MOVED_MB)]
    trial = record["trials"][0]
    assert trial["status"] == "done"
    assert len(trial["failures"]) == 1 and f"moved to {MOVED_MB} MB" in trial["failures"][0]
    assert [h["memory_mb"] for h in trial["history"]] == [MOVED_MB, MOVED_MB]
