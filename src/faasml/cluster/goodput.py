"""Performance model of an elastic training job: throughput × statistical efficiency = goodput.

- Throughput (FaPES §4.1): iteration time of a placement and local batch size, interpolated
  from the measured step and sync times of the Pollux artifact where the placement was
  measured, else computation time (measured) plus a communication term from a
  :class:`CommModel`. FaPES learns that term with a graph network trained on NCCL
  measurements, which are not available here; :class:`TopologyCommModel` is an analytical,
  topology-aware stand-in fitted to the traces, behind the same interface.
- Statistical efficiency (FaPES §4.2, Pollux eq. 7): ``E(φ, M) = (φ + M0) / (φ + M)`` with
  the gradient noise scale ``φ = grad_var / grad_sqr`` measured at the current epoch.
- Goodput = throughput × efficiency, in units of statistical progress per second
  (iterations at the initial batch size M0), and the batch size that maximises it for an
  allocation (batch size and learning rate co-adapted; the learning rate scales linearly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np
import numpy.typing as npt

from faasml.cluster.plain import Job, Layout, packed_layout
from faasml.cluster.traces import ApplicationTrace

FloatArray = npt.NDArray[np.float64]

DEFAULT_SWITCH_SLOWDOWN = 1.5
"""Factor on the communication time per extra switch tier crossed (bandwidth halves from
ToR to edge in FaPES §7.5's 200/400/800 Gbps fat tree, shared by the servers below it)."""


def efficiency(
    grad_sqr: FloatArray | float,
    grad_var: FloatArray | float,
    batch: FloatArray | float,
    init_batch: float,
) -> FloatArray:
    """Statistical efficiency of batch ``batch`` relative to ``init_batch`` (FaPES §4.2,
    Pollux eq. 7): ``(φ + 1) / (φ + M/M0)`` with ``φ = grad_var / grad_sqr``; in (0, 1]."""
    scale = np.asarray(batch, dtype=np.float64) / init_batch
    sqr = np.maximum(np.asarray(grad_sqr, dtype=np.float64), 1e-300)
    var = np.maximum(np.asarray(grad_var, dtype=np.float64), 0.0)
    gain = (var + sqr) / (var / scale + sqr)
    return np.asarray(gain / scale, dtype=np.float64)


class CommModel(Protocol):
    """Gradient synchronisation time of one iteration for a layout (FaPES §4.1 T_comm).

    Implementations: :class:`TopologyCommModel` (analytical); a learned graph model
    (FaPES's GNN over the allocated subgraph) would implement the same call.
    """

    def sync_time(self, layout: Layout) -> float: ...


@dataclass(frozen=True)
class TopologyCommModel:
    """Analytical topology-aware all-reduce time.

    One server: ``intra0 + intra1·(r − 1)`` (NVLink/PCIe ring over r GPUs); several
    servers: ``inter0 + inter1·(nodes − 1)`` (network ring over the servers); multiplied by
    ``switch_slowdown ** (switches − 1)`` when the servers span several switches. One GPU
    does not synchronise beyond ``single``.
    """

    single: float
    intra0: float
    intra1: float
    inter0: float
    inter1: float
    switch_slowdown: float = DEFAULT_SWITCH_SLOWDOWN

    def sync_time(self, layout: Layout) -> float:
        if layout.gpus <= 1:
            return self.single
        if layout.nodes == 1:
            base = self.intra0 + self.intra1 * (layout.gpus - 1)
        else:
            base = self.inter0 + self.inter1 * (layout.nodes - 1)
        return max(base, self.single) * self.switch_slowdown ** max(layout.switches - 1, 0)

    @classmethod
    def fit(
        cls, trace: ApplicationTrace, switch_slowdown: float = DEFAULT_SWITCH_SLOWDOWN
    ) -> TopologyCommModel:
        """Least-squares fit of the four coefficients to every measured sync time."""
        nodes = np.array([len(p) for p in trace.placements], dtype=np.float64)
        reps = np.array([sum(int(c) for c in p) for p in trace.placements], dtype=np.float64)
        nodes = np.concatenate([nodes, trace.scal_nodes])
        reps = np.concatenate([reps, trace.scal_replicas])
        sync = np.concatenate([trace.sync_time, trace.scal_sync_time])
        return cls.fit_points(nodes, reps, sync, switch_slowdown)

    @classmethod
    def fit_points(
        cls,
        nodes: FloatArray,
        reps: FloatArray,
        sync: FloatArray,
        switch_slowdown: float = DEFAULT_SWITCH_SLOWDOWN,
    ) -> TopologyCommModel:
        """Least-squares fit to sync times measured on ``nodes`` servers with ``reps`` GPUs
        in all (one server: intra terms; several: inter terms; slopes kept >= 0)."""
        single = float(np.median(sync[reps == 1])) if np.any(reps == 1) else 0.0

        def line(x: FloatArray, y: FloatArray) -> tuple[float, float]:
            if len(x) == 0:
                return single, 0.0
            if len(np.unique(x)) < 2:
                return float(np.mean(y)), 0.0
            slope, icpt = np.polyfit(x, y, 1)
            slope = max(float(slope), 0.0)
            return float(np.mean(y - slope * x)) if slope == 0.0 else float(icpt), slope

        intra = (nodes == 1) & (reps > 1)
        inter = nodes > 1
        i0, i1 = line(reps[intra] - 1, sync[intra])
        e0, e1 = line(nodes[inter] - 1, sync[inter])
        return cls(single, max(i0, 0.0), i1, max(e0, 0.0), e1, switch_slowdown)


@dataclass(frozen=True)
class BatchChoice:
    """A batch configuration and its predicted performance on one layout."""

    goodput: float
    """Statistical progress per second."""
    throughput: float
    """Samples per second."""
    batch: int
    atomic_bsz: int
    accum_steps: int


class AppModel:
    """The performance model of one application, from its measured traces."""

    def __init__(self, trace: ApplicationTrace, comm: CommModel | None = None) -> None:
        self.trace = trace
        self.name = trace.name
        self.comm: CommModel = comm or TopologyCommModel.fit(trace)
        self.init_batch = trace.batch_sizes[0]
        self.max_batch = trace.batch_sizes[-1]
        rows: dict[tuple[int, ...], list[int]] = {}
        for i, p in enumerate(trace.placements):
            key = tuple(sorted((int(c) for c in p), reverse=True))
            rows.setdefault(key, []).append(i)
        self._measured: dict[tuple[int, ...], tuple[FloatArray, FloatArray, FloatArray]] = {}
        for key, idx in rows.items():
            bsz = trace.local_bsz[idx]
            order = np.argsort(bsz, kind="stable")
            ub, inv = np.unique(bsz[order], return_inverse=True)
            step = np.bincount(inv, trace.step_time[idx][order]) / np.bincount(inv)
            sync = np.bincount(inv, trace.sync_time[idx][order]) / np.bincount(inv)
            self._measured[key] = (ub, step, sync)
        # Per-epoch progress marks (Pollux: the slowest batch size's progress per epoch).
        self._epoch_progress = np.concatenate([[0.0], trace.progress.min(axis=0)])
        grid = np.unique(
            np.round(np.geomspace(trace.min_local_bsz, trace.max_local_bsz, 24)).astype(int)
        )
        self._bsz_grid = grid.astype(np.float64)

    # -- progress and gradient statistics -------------------------------------------------
    def progress_at(self, epoch: int) -> float:
        """Statistical progress at the end of ``epoch`` epochs."""
        epoch = min(max(epoch, 0), len(self._epoch_progress) - 1)
        return float(self._epoch_progress[epoch])

    def epoch_of(self, progress: float) -> int:
        """The epoch a job with this progress is in (0-based)."""
        e = int(np.searchsorted(self._epoch_progress, progress, side="right")) - 1
        return min(max(e, 0), self.trace.max_epochs - 1)

    def work(self, job: Job) -> float:
        """Progress at which ``job`` completes: its epochs (default: the trace's length)."""
        epochs = self.trace.max_epochs if job.epochs is None else job.epochs
        return self.progress_at(min(epochs, len(self._epoch_progress) - 1))

    def grad_stats(self, batch: FloatArray, epoch: int) -> tuple[FloatArray, FloatArray]:
        """grad_sqr and grad_var at ``epoch`` for global batch sizes, interpolated linearly
        between the measured batch sizes (clipped to their range)."""
        sizes = np.asarray(self.trace.batch_sizes, dtype=np.float64)
        b = np.clip(np.asarray(batch, dtype=np.float64), sizes[0], sizes[-1])
        sqr = np.interp(b, sizes, self.trace.grad_sqr[:, epoch])
        var = np.interp(b, sizes, self.trace.grad_var[:, epoch])
        return sqr, var

    # -- throughput -----------------------------------------------------------------------
    def step_sync(self, layout: Layout, local_bsz: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Step and sync time of one iteration (FaPES §4.1) for atomic local batch sizes."""
        bsz = np.asarray(local_bsz, dtype=np.float64)
        measured = self._measured.get(layout.counts) if layout.switches <= 1 else None
        if measured is not None:
            ub, step, sync = measured
            return np.interp(bsz, ub, step), np.interp(bsz, ub, sync)
        per_server = min(max(layout.counts, default=1), 4)
        while (per_server,) not in self._measured and per_server > 1:
            per_server -= 1
        ub, step, sync = self._measured[(per_server,)]
        compute = np.interp(bsz, ub, step - sync)
        comm = self.comm.sync_time(layout)
        return compute + comm, np.full_like(compute, comm)

    # -- goodput --------------------------------------------------------------------------
    def max_gpus(self, job: Job) -> int:
        """GPUs beyond which the job cannot grow: its bound, the trace's, and the batch
        bound (each GPU needs at least the smallest local batch)."""
        limit = (job.max_batch or self.max_batch) // self.trace.min_local_bsz
        for bound in (job.max_gpus, self.trace.max_gpus):
            if bound is not None:
                limit = min(limit, bound)
        return max(limit, job.min_gpus, 1)

    def fixed_batch(self, job: Job) -> int:
        """The batch size a non-adaptive job runs with (its request, or the trace's)."""
        return self.trace.fixed_batch or job.batch_size

    def candidates(
        self, layout: Layout, job: Job, *, adaptive: bool
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Batch configurations a job may run with on ``layout``: atomic local batch,
        accumulation steps, global batch and iteration time of each (epoch-independent).

        Adaptive jobs search atomic local batches between the smallest and largest measured
        ones and up to 15 accumulation steps, within the job's global batch bounds (Pollux
        §3.2); the others run their fixed batch split over the GPUs."""
        key = _adaptive_key(job) if adaptive else _fixed_key(job)
        return _candidates(self, layout, key, adaptive)

    def _candidates(
        self, layout: Layout, job: Job, adaptive: bool
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        r = layout.gpus
        max_local = self.trace.max_local_bsz
        if adaptive and self.trace.fixed_batch is None:
            lo = max(job.min_batch or self.init_batch, 1)
            hi = max(job.max_batch or self.max_batch, lo)
            bsz = self._bsz_grid[:, None]
            accum = np.arange(16, dtype=np.float64)[None, :]
            batch = r * bsz * (accum + 1)
            ok = (batch >= lo) & (batch <= hi)
            if not ok.any():
                ok = batch == batch.min()
            bsz_b = np.broadcast_to(bsz, batch.shape)[ok]
            acc_b = np.broadcast_to(accum, batch.shape)[ok]
            batch_b = batch[ok]
        else:
            total = self.fixed_batch(job)
            local = math.ceil(total / r - 1e-8)
            acc = math.ceil(local / max_local - 1e-8) - 1
            atomic = math.ceil(local / (acc + 1) - 1e-8)
            atomic = max(min(atomic, int(self.max_batch / (r * (acc + 1)))), 1)
            bsz_b = np.array([float(atomic)])
            acc_b = np.array([float(acc)])
            batch_b = r * bsz_b * (acc_b + 1)
        step, sync = self.step_sync(layout, bsz_b)
        iteration = step + acc_b * (step - sync)
        return bsz_b, acc_b, batch_b, iteration

    def goodput_of(self, batch: FloatArray, iteration: FloatArray, epoch: int) -> FloatArray:
        """Goodput = throughput × efficiency (FaPES §4.2), in progress per second."""
        sqr, var = self.grad_stats(batch, epoch)
        eff = efficiency(sqr, var, batch, self.init_batch)
        return np.asarray(eff * (batch / self.init_batch) / iteration, dtype=np.float64)

    def choose(self, layout: Layout, progress: float, job: Job, *, adaptive: bool) -> BatchChoice:
        """Best batch configuration on ``layout`` (adaptive: batch size co-adapted to the
        largest goodput, FaPES §4.2 / Pollux §3.2; else the job's fixed batch)."""
        if layout.gpus <= 0:
            return BatchChoice(0.0, 0.0, 0, 0, 0)
        bsz_b, acc_b, batch_b, iteration = self.candidates(layout, job, adaptive=adaptive)
        good = self.goodput_of(batch_b, iteration, self.epoch_of(progress))
        i = int(np.argmax(good))
        return BatchChoice(
            float(good[i]),
            float(batch_b[i] / iteration[i]),
            int(batch_b[i]),
            int(bsz_b[i]),
            int(acc_b[i]),
        )

    def choose_cached(
        self, layout: Layout, progress: float, job: Job, *, adaptive: bool
    ) -> BatchChoice:
        """:meth:`choose`, memoised by epoch (the gradient statistics change per epoch)."""
        key = _adaptive_key(job) if adaptive else _fixed_key(job)
        return _choose(self, layout, self.epoch_of(progress), key, adaptive)

    def goodput_curve(
        self,
        job: Job,
        progress: float,
        max_gpus: int,
        gpus_per_server: int,
        servers_per_switch: int,
        *,
        adaptive: bool,
    ) -> FloatArray:
        """Goodput for 0..max_gpus GPUs packed on the fewest servers (index = GPUs)."""
        return _curve(
            self,
            _adaptive_key(job) if adaptive else _fixed_key(job),
            self.epoch_of(progress),
            max_gpus,
            gpus_per_server,
            servers_per_switch,
            adaptive,
        )


def _adaptive_key(job: Job) -> Job:
    # Adaptive curves depend only on the batch bounds: share them between jobs.
    return _key(job.application, 1, job.min_batch, job.max_batch)


def _fixed_key(job: Job) -> Job:
    return _key(job.application, job.batch_size, None, job.max_batch)


@lru_cache(maxsize=4096)
def _key(application: str, batch: int, min_batch: int | None, max_batch: int | None) -> Job:
    """One shared key job per setting (building and checking a Job costs more than the
    cache lookups it keys)."""
    return Job("~", application, 0.0, 1, batch, 1, None, min_batch, max_batch)


@lru_cache(maxsize=262144)
def _choose(model: AppModel, layout: Layout, epoch: int, job: Job, adaptive: bool) -> BatchChoice:
    return model.choose(layout, model.progress_at(epoch), job, adaptive=adaptive)


@lru_cache(maxsize=65536)
def _candidates(
    model: AppModel, layout: Layout, job: Job, adaptive: bool
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    out = model._candidates(layout, job, adaptive)
    for array in out:
        array.setflags(write=False)
    return out


@lru_cache(maxsize=4096)
def _curve_grid(
    model: AppModel,
    job: Job,
    max_gpus: int,
    gpus_per_server: int,
    servers_per_switch: int,
    adaptive: bool,
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.intp]]:
    """Candidates of every GPU count 1..max_gpus, concatenated, with segment starts."""
    batches, iterations, starts = [], [], []
    offset = 0
    for n in range(1, max_gpus + 1):
        layout = packed_layout(n, gpus_per_server, servers_per_switch)
        _, _, batch, iteration = _candidates(model, layout, job, adaptive)
        batches.append(batch)
        iterations.append(iteration)
        starts.append(offset)
        offset += len(batch)
    return np.concatenate(batches), np.concatenate(iterations), np.array(starts, dtype=np.intp)


@lru_cache(maxsize=65536)
def _curve(
    model: AppModel,
    job: Job,
    epoch: int,
    max_gpus: int,
    gpus_per_server: int,
    servers_per_switch: int,
    adaptive: bool,
) -> FloatArray:
    out = np.zeros(max_gpus + 1)
    if max_gpus >= 1:
        batch, iteration, starts = _curve_grid(
            model, job, max_gpus, gpus_per_server, servers_per_switch, adaptive
        )
        out[1:] = np.maximum.reduceat(model.goodput_of(batch, iteration, epoch), starts)
    out.setflags(write=False)
    return out
