"""Segments of several epochs: one invocation per worker trains short epochs back to back and
the results are those of one-epoch segments (losses, validation, the model and its buffers);
a segment never crosses a stage's rung; a worker killed inside one is recovered from the last
checkpoint with nothing changed (a killed coordinator: test_tune_resume.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from faasml.runtime.coordinator import Coordinator, CoordinatorOptions, TrialFault, TrialState
from faasml.runtime.function.checkpoint import load_checkpoint
from faasml.runtime.function.worker import Fault
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.sync.stores import open_store
from faasml.types import Allocation
from faasml.workloads.global_batch import rounds_per_epoch

from .test_faults import _coordinator

ALLOCATION = Allocation(2, 256, "embedded", "allreduce")
ROUNDS = rounds_per_epoch(960, 50)  # the fault test's job: 960 training samples, batch 50


def _train(
    folder: Path,
    epochs_per_segment: int | None,
    rungs: tuple[int, ...] = (5,),
    faults: list[TrialFault] | None = None,
    warm_start_s: float | None = None,
) -> tuple[TrialState, Coordinator, np.ndarray]:
    """One trial of the fault test's logistic regression on 2 workers, run to each rung in
    turn (as stages are); ``warm_start_s`` sets the per-invocation time the coordinator
    weighs epochs against."""
    trial = TrialState(0, {})
    options = CoordinatorOptions(sync_timeout_s=10.0, epochs_per_segment=epochs_per_segment)
    with _coordinator(folder, {"lr": 0.1, "momentum": 0.9}, options=options, faults=faults) as c:
        if warm_start_s is not None:
            c.estimator.platform = dataclasses.replace(
                c.estimator.platform, warm_start_s=warm_start_s
            )
        for rung in rungs:
            c.run([trial], ALLOCATION, until_epoch=rung)
        c.close()
    assert trial.checkpoint is not None
    return trial, c, load_checkpoint(c.objects, trial.checkpoint).params


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrialState, np.ndarray]:
    trial, coordinator, params = _train(tmp_path_factory.mktemp("one"), 1)
    assert coordinator.segments == 5 and trial.restarts == 0
    return trial, params


def _same_history(got: TrialState, want: TrialState) -> None:
    assert [h["epoch"] for h in got.history] == [h["epoch"] for h in want.history]
    for a, b in zip(got.history, want.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-12)
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-12)
        assert a["val_accuracy"] == b["val_accuracy"]


def test_three_epochs_to_a_segment_train_the_same_model(
    tmp_path: Path, one_epoch: tuple[TrialState, np.ndarray]
) -> None:
    trial, coordinator, params = _train(tmp_path, 3)
    clean, clean_params = one_epoch
    np.testing.assert_array_equal(params, clean_params)
    _same_history(trial, clean)
    assert trial.epochs_done == 5 and trial.status == "done"
    assert trial.round_id == 5 * ROUNDS
    # The first segment on the allocation is one epoch (nothing measured there yet), then
    # three in one invocation per worker, then the one left before the rung.
    assert coordinator.segments == 3
    assert [h["invocations"] for h in trial.history] == [1, 1, 0, 0, 1]
    assert all(h["epoch_s"] > 0 and h["compute_s"] > 0 for h in trial.history)
    invocations = [c for c in coordinator.meter.charges if c.kind == "invocation"]
    assert len(invocations) == 2 * 3  # two workers per segment


def test_a_worker_killed_in_a_later_epoch_of_a_segment_gives_the_same_model(
    tmp_path: Path, one_epoch: tuple[TrialState, np.ndarray]
) -> None:
    # Epochs 2-4 (1-based) share a segment; worker 1 dies in the third round of epoch 3.
    fault = TrialFault(0, 2, Fault(worker_id=1, round_id=2 * ROUNDS + 2, during="compute"))
    trial, _, params = _train(tmp_path, 3, faults=[fault])
    clean, clean_params = one_epoch
    assert trial.restarts == 1 and trial.failures[0].startswith("epoch 2 batch 0")
    np.testing.assert_array_equal(params, clean_params)
    _same_history(trial, clean)


def test_epochs_short_against_a_segments_fixed_time_share_it_up_to_the_rung(
    tmp_path: Path, one_epoch: tuple[TrialState, np.ndarray]
) -> None:
    # Chosen by the coordinator (no cap): a segment's fixed time of 3 s (below half the 10 s
    # synchronisation timeout) against epochs of milliseconds. The rung after epoch 2 ends a
    # segment; the rest is one.
    trial, coordinator, params = _train(tmp_path, None, rungs=(2, 5), warm_start_s=3.0)
    assert [h["invocations"] for h in trial.history] == [1, 1, 1, 0, 0]
    assert coordinator.segments == 3
    clean, clean_params = one_epoch
    np.testing.assert_array_equal(params, clean_params)
    _same_history(trial, clean)


def test_a_fixed_time_near_the_synchronisation_timeout_keeps_one_epoch_per_segment(
    tmp_path: Path,
) -> None:
    # Worker 0 evaluates between epochs while the others wait in their next round: where a
    # segment's fixed time is over half the synchronisation timeout (10 s), one epoch each.
    trial, coordinator, _ = _train(tmp_path, None, rungs=(4,), warm_start_s=6.0)
    assert [h["invocations"] for h in trial.history] == [1, 1, 1, 1]
    assert coordinator.segments == 4


def test_buffers_and_dropout_are_the_same_over_several_epochs(tmp_path: Path) -> None:
    """A BatchNorm and dropout CNN on two workers: three epochs in one segment give the
    checkpoint (parameters and averaged buffers) and validation of one-epoch segments."""
    pytest.importorskip("torch")
    import faasml

    from .test_function_api import SETTINGS, SPACE, bn_cnn

    def run(folder: Path, epochs_per_segment: int) -> dict[str, Any]:
        tuner = faasml.Tuner(
            bn_cnn,
            SPACE,
            budget=0.05,
            tune_config=faasml.TuneConfig(num_samples=1),
            settings={**SETTINGS, "tuning.epochs_per_stage": 4},
            run_dir=folder,
        )
        options = CoordinatorOptions(epochs_per_segment=epochs_per_segment)
        tune = TuneRun(tuner.job, tuner.constraint, tuner.run_dir, options=options, measure=False)
        tune.plan()
        assert tune.record.plan is not None
        tune.record.plan.stages[0].allocation = dataclasses.replace(ALLOCATION, memory_mb=1024)
        return record_to_json(tune.execute())

    one, three = run(tmp_path / "one", 1), run(tmp_path / "three", 3)
    assert [h["invocations"] for h in three["trials"][0]["history"]] == [1, 1, 0, 0]
    for a, b in zip(one["trials"][0]["history"], three["trials"][0]["history"], strict=True):
        assert a["val_loss"] == b["val_loss"] and a["loss"] == b["loss"]
    saved = []
    for folder, record in ((tmp_path / "one", one), (tmp_path / "three", three)):
        with open_store(f"embedded://{folder / 'objects'}") as store:
            saved.append(load_checkpoint(store, record["trials"][0]["checkpoint"]))
    np.testing.assert_array_equal(saved[0].params, saved[1].params)
    np.testing.assert_array_equal(saved[0].buffers, saved[1].buffers)
    assert saved[0].buffers.size > 0
