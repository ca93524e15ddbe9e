"""Functions that start late (issue 34): a synchronised round waits for workers still starting,
a retry after a start that outlasted its bound gets twice the bound, and a trial whose
functions keep failing to meet moves to fewer, larger ones. Late starts and hangs are injected
(``worker_faults``), never read from the machine."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from faasml.catalog import load_catalog
from faasml.job import from_mapping
from faasml.runtime.coordinator import Coordinator, CoordinatorOptions, TrialFault, TrialState
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.function.worker import Fault, ModelRecipe
from faasml.runtime.platforms.contract import open_platform
from faasml.sync.stores import open_store
from faasml.types import Allocation
from faasml.workloads.build import load_data

JOB = {
    "name": "late-start",
    "model": "logistic-regression",
    "dataset": {"synthetic": "higgs-like", "samples": 1200, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "batch_size": 50,
    "seed": 3,
}


@contextmanager
def _coordinator(folder: Path, faults: list[TrialFault], **options: Any) -> Iterator[Coordinator]:
    """A coordinator of JOB's logistic regression on the local platform, with ``options``,
    ``faults`` injected."""
    train, test = load_data(from_mapping(JOB).dataset)
    recipe = ModelRecipe(
        "logistic-regression", {}, train.input_shape, train.num_classes, "sgd", {"lr": 0.1}, 50, 3
    )
    catalog = load_catalog("local")
    with open_platform("local", catalog, cpu="none") as platform:
        coordinator = Coordinator(
            platform,
            catalog,
            Meter(catalog),
            open_store(f"embedded://{folder}/objects"),
            f"embedded://{folder}/sync",
            lambda _: recipe,
            namespace="run",
            options=CoordinatorOptions(**options),
            faults=faults,
        )
        coordinator.set_data(train, test)
        yield coordinator


def _late(worker: int, delay_s: float) -> TrialFault:
    """Worker ``worker`` of trial 0's first segment starts ``delay_s`` late."""
    return TrialFault(0, 0, Fault(worker, 0, during="late-start", delay_s=delay_s))


def test_a_worker_starting_after_the_sync_timeout_does_not_fail_the_round(
    tmp_path: Path,
) -> None:
    """Worker 2 starts twice the synchronisation timeout late: the others wait for its start
    (within the start bound) instead of timing out in their first round."""
    trial = TrialState(0, {})
    with _coordinator(tmp_path, [_late(2, 6.0)], sync_timeout_s=3.0) as coordinator:
        coordinator.run([trial], Allocation(3, 256, "embedded"), until_epoch=1)
        coordinator.close()
    assert trial.status == "done" and trial.epochs_done == 1
    assert trial.restarts == 0, trial.failures


def test_a_retry_after_a_start_past_its_bound_gets_twice_the_bound(tmp_path: Path) -> None:
    """A worker that has not started within the start bound fails the segment, naming it; the
    retry's workers have twice as long to start, so the same cold start does not fail it."""
    trial = TrialState(0, {})
    faults = [_late(1, 5.0)]
    with _coordinator(tmp_path, faults, sync_timeout_s=3.0, start_allowance_s=2.0) as coordinator:
        # Predicted starts far under the allowance: the bound is the allowance.
        platform = dataclasses.replace(coordinator.catalog.platform, cold_start_s=0.01)
        coordinator.estimator.platform = platform
        coordinator.run([trial], Allocation(2, 256, "embedded"), until_epoch=1)
        coordinator.close()
    assert trial.status == "done" and trial.epochs_done == 1
    assert "worker 1 did not start within 2 s" in trial.failures[0]
    assert all("within 2 s" not in failure for failure in trial.failures[1:])


def test_a_trial_whose_functions_keep_failing_to_meet_moves_to_fewer(tmp_path: Path) -> None:
    """Worker 3 of 4 hangs in the first two tries: the others time out in their round twice,
    and the trial moves to 2 functions of twice the memory, where it finishes; the move and
    its reason are in the trial's failures (the run's record) and the coordinator's moves."""
    hang = Fault(3, 1, during="hang")
    trial = TrialState(0, {})
    faults = [TrialFault(0, 0, hang), TrialFault(0, 0, hang)]
    with _coordinator(tmp_path, faults, sync_timeout_s=5.0) as coordinator:
        coordinator.run([trial], Allocation(4, 256, "embedded"), until_epoch=2)
        coordinator.close()
    assert trial.status == "done" and trial.epochs_done == 2
    assert len(trial.failures) == 2 and all("TimeoutError" in f for f in trial.failures)
    assert "moved to 2 × 512 MB: 2 synchronisation failures with 4 functions" in trial.failures[1]
    assert (trial.functions, trial.memory_mb) == (2, 0)  # the memory follows the count
    assert [h["n"] for h in trial.history] == [2, 2]
    (move,) = coordinator.function_moves
    assert (move.trial, move.before.n, move.after.n, move.after.memory_mb) == (0, 4, 2, 512)
