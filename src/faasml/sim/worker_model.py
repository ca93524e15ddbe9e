"""The simulated worker: what a training segment reports, without training.

A worker function given a ``WorkerTask`` trains rounds of an epoch and reports a
``SegmentReport``. Its model here reports the same fields: the time from the performance model
(CE-scaling t'(θ) of the task's allocation, split per round into loading, computation and
synchronisation, times mean-one log-normal noise), and the losses (and an accuracy that rises
as they fall) from a synthetic loss curve of the trial's configuration (``sim.synthetic``: each
configuration its own curve, drawn from the seed and the configuration, so trials differ and
ranking them means something). Worker 0 names the segment's checkpoint and, at an epoch's end,
reports the validation scores.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.space import evaluate_allocation
from faasml.runtime.coordinator import WORKER_FN
from faasml.runtime.function.task import SegmentReport, WorkerTask
from faasml.sim.platform import SimOutcome, SimulatedPlatform
from faasml.sim.synthetic import SyntheticCurve, random_curve
from faasml.types import Allocation
from faasml.workload import Workload
from faasml.workloads.global_batch import rounds_per_epoch


def _lognormal(rng: np.random.Generator, cv: float) -> float:
    """One mean-one multiplier with coefficient of variation ``cv`` (1 when cv = 0)."""
    if cv == 0:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    return float(rng.lognormal(-sigma * sigma / 2, sigma))


def _scores(loss: float) -> dict[str, float]:
    """What worker 0's evaluation reports: the curve's loss, and an accuracy that rises as
    it falls (exp(−loss): the mean probability of the true class where the loss is a
    cross-entropy), so a job ranked by accuracy ranks its trials as by loss."""
    return {"loss": loss, "accuracy": math.exp(-loss)}


class SimulatedWorker:
    """The model of ``WORKER_FN`` on a simulated platform (a ``SimFunction``)."""

    def __init__(
        self,
        workload: Workload,
        catalog: Catalog,
        *,
        noise: float = 0.1,
        seed: int = 0,
        storage: str | None = None,
        stores: Mapping[str, str] | None = None,
    ) -> None:
        """``workload`` and ``catalog`` price the segments; ``noise`` is the coefficient of
        variation of each segment's time; ``stores`` maps a task's sync URL to the catalog
        storage it stands for, ``storage`` names the one of any other URL (by default the
        first the catalog offers)."""
        if not math.isfinite(noise) or noise < 0:
            raise ConfigError(f"the value of noise is {noise}, but must be a finite number >= 0")
        self.workload, self.catalog, self.noise, self.seed = workload, catalog, noise, seed
        self.storage = storage or sorted(catalog.storages)[0]
        self.stores = dict(stores or {})
        self._rng = np.random.default_rng([seed, 1])
        self._curves: dict[str, SyntheticCurve] = {}
        self._rounds: dict[tuple[int, int, str, str], tuple[float, float, float, float]] = {}

    def curve(self, task: WorkerTask) -> SyntheticCurve:
        """The loss curve of the task's configuration (the same for every worker and segment
        of one trial)."""
        recipe = task.recipe
        key = repr(sorted((str(k), repr(v)) for k, v in recipe.hyperparameters.items()))
        key += repr(sorted((str(k), repr(v)) for k, v in recipe.model_options.items()))
        key += f"|{recipe.batch_size}"
        if key not in self._curves:
            rng = np.random.default_rng([self.seed, zlib.crc32(key.encode())])
            self._curves[key] = random_curve(rng, epochs=(3.0, 40.0))
        return self._curves[key]

    def _per_round(self, task: WorkerTask, memory_mb: int) -> tuple[float, float, float, float]:
        """Seconds of loading (once a segment), computation and synchronisation (a round's),
        and the invocation's own (once): the performance model's epoch over its rounds."""
        storage = self.stores.get(task.sync_url, self.storage)
        key = (task.n, memory_mb, storage, task.scheme)
        if key not in self._rounds:
            self._rounds[key] = self._priced(Allocation(task.n, memory_mb, storage, task.scheme))
        return self._rounds[key]

    def _priced(self, allocation: Allocation) -> tuple[float, float, float, float]:
        table = evaluate_allocation(self.workload, self.catalog, allocation)
        if len(table) == 0:
            raise ConfigError(f"the performance model has no price for {allocation}")
        k = max(int(self.workload.iterations_per_epoch(allocation.n)), 1)
        load, compute = float(table.load_s[0]), float(table.compute_s[0]) / k
        return load, compute, float(table.sync_s[0]) / k, float(table.invoke_s[0])

    def __call__(self, payload: Any, memory_mb: int, instance: int) -> SimOutcome:
        task: WorkerTask = payload
        total = rounds_per_epoch(self.workload.samples, task.recipe.batch_size)
        stop = total if task.stop_batch is None else task.stop_batch
        load, compute, sync, invoke = self._per_round(task, memory_mb)
        slower = _lognormal(self._rng, self.noise)
        compute, sync = compute * slower, sync * slower
        curve = self.curve(task)
        share = task.recipe.batch_size / task.n  # a worker's rows of a round
        epochs: list[dict[str, Any]] = []
        spans = [stop - task.start_batch] + [total] * (task.epochs - 1)
        for offset, rounds in enumerate(spans):
            loss = curve.observed(task.epoch + offset + 1)
            samples = round(rounds * share)
            epochs.append(
                {
                    "loss_sum": loss * samples,
                    "samples": samples,
                    "compute_s": rounds * compute,
                    "sync_s": rounds * sync,
                    "elapsed_s": rounds * (compute + sync),
                    "val": _scores(loss) if task.worker_id == 0 else {},
                    "reported": {},
                }
            )
        report = self._report(task, epochs, load, sum(spans))
        return SimOutcome(report.elapsed_s + invoke, report, cpu_bound=True)

    def _report(
        self, task: WorkerTask, epochs: list[dict[str, Any]], load: float, rounds: int
    ) -> SegmentReport:
        """The worker's report of the segment whose epochs (or part of one) are ``epochs``."""
        lead = task.worker_id == 0
        epoch_done = task.stop_batch is None or task.epochs > 1
        compute = sum(e["compute_s"] for e in epochs)
        sync = sum(e["sync_s"] for e in epochs)
        return SegmentReport(
            worker_id=task.worker_id,
            epoch=task.epoch,
            rounds=rounds,
            samples=sum(e["samples"] for e in epochs),
            loss_sum=sum(e["loss_sum"] for e in epochs),
            load_s=load,
            compute_s=compute,
            sync_s=sync,
            elapsed_s=load + compute + sync,
            epoch_done=epoch_done,
            batch_size=task.recipe.batch_size,
            val=dict(epochs[-1]["val"]) if lead and epoch_done else {},
            checkpoint=task.checkpoint_out if lead else None,
            epochs=epochs if task.epochs > 1 else [],
        )


def simulated_platform(
    workload: Workload,
    catalog: Catalog,
    *,
    noise: float = 0.1,
    cold_start_noise: float = 0.3,
    seed: int = 0,
) -> SimulatedPlatform:
    """A simulated ``catalog`` platform whose worker functions are ``SimulatedWorker``s of
    ``workload``: a run's coordinator drives it as it drives a real one."""
    worker = SimulatedWorker(workload, catalog, noise=noise, seed=seed)
    return SimulatedPlatform(
        catalog, {WORKER_FN: worker}, cold_start_noise=cold_start_noise, seed=seed
    )
