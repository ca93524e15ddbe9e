"""Run a synchronisation scheme across real worker processes and time it.

``run_reduce`` starts n spawned processes, each opening the store from its URL (as a function
would), and runs ``rounds`` reduce rounds of deterministic random gradients. It returns, per
worker, a digest of every aggregate it received (to check that all got the exact mean), when
each round started and ended, and the store requests it issued. The tests, the sync benchmark
and store profiling use it.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import queue
import time
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import ConfigError
from faasml.sync.schemes import SCHEME_CLASSES
from faasml.sync.stores import StoreStats, open_store
from faasml.sync.stores.throttled import ThrottledStore


def gradient_for(seed: int, worker_id: int, round_id: int, size: int) -> NDArray[np.float32]:
    """The gradient worker ``worker_id`` hands in at ``round_id``: standard normal, seeded."""
    rng = np.random.default_rng([seed, worker_id, round_id])
    return rng.standard_normal(size, dtype=np.float32)


def digest(array: NDArray[np.float32]) -> str:
    """A short fingerprint of an array's exact bytes."""
    return hashlib.sha256(np.ascontiguousarray(array, dtype="<f4").tobytes()).hexdigest()[:32]


@dataclass(frozen=True)
class WorkerOutcome:
    """What one worker process saw: aggregates' digests, round times, requests, or its error."""

    worker_id: int
    digests: tuple[str, ...]
    round_times: tuple[tuple[float, float], ...]  # (start, end) on the system monotonic clock
    stats: StoreStats
    error: str | None


@dataclass(frozen=True)
class ReduceRun:
    """All workers' outcomes of one ``run_reduce``."""

    outcomes: tuple[WorkerOutcome, ...]

    def errors(self) -> dict[int, str]:
        return {o.worker_id: o.error for o in self.outcomes if o.error is not None}

    def round_seconds(self) -> list[float]:
        """Per round: first worker's start to last worker's end (the round's wall time)."""
        rounds = min(len(o.round_times) for o in self.outcomes)
        return [
            max(o.round_times[r][1] for o in self.outcomes)
            - min(o.round_times[r][0] for o in self.outcomes)
            for r in range(rounds)
        ]

    def total_stats(self) -> StoreStats:
        total = StoreStats()
        for outcome in self.outcomes:
            for name, value in vars(outcome.stats).items():
                setattr(total, name, getattr(total, name) + value)
        return total


def expected_mean(seed: int, n_workers: int, round_id: int, size: int) -> NDArray[np.float32]:
    """The mean every worker must receive (computed the way every scheme computes it)."""
    from faasml.sync.schemes._base import mean_of

    return mean_of([gradient_for(seed, w, round_id, size) for w in range(n_workers)])


def _worker(
    store_url: str,
    scheme_name: str,
    n_workers: int,
    worker_id: int,
    namespace: str,
    size: int,
    rounds: int,
    seed: int,
    timeout_s: float,
    worker_mbps: float | None,
    barrier: Barrier,
    results: Any,
) -> None:
    digests: list[str] = []
    times: list[tuple[float, float]] = []
    stats = StoreStats()
    error: str | None = None
    try:
        with open_store(store_url) as opened:
            store = opened if worker_mbps is None else ThrottledStore(opened, worker_mbps)
            scheme = SCHEME_CLASSES.get(scheme_name)(store, n_workers, namespace, timeout_s)
            for round_id in range(rounds):
                gradient = gradient_for(seed, worker_id, round_id, size)
                barrier.wait(timeout=timeout_s + 60)
                start = time.monotonic()
                mean = scheme.reduce(worker_id, round_id, gradient)
                times.append((start, time.monotonic()))
                digests.append(digest(mean))
            stats = store.stats.copy()
    except Exception as err:  # reported to the parent, which decides
        error = f"{type(err).__name__}: {err}"
        if not isinstance(err, TimeoutError):
            error += "\n" + traceback.format_exc()
    results.put(WorkerOutcome(worker_id, tuple(digests), tuple(times), stats, error))


def run_reduce(
    store_url: str,
    scheme: str,
    n_workers: int,
    size: int,
    rounds: int = 1,
    *,
    seed: int = 0,
    timeout_s: float = 60.0,
    absent: Sequence[int] = (),
    namespace: str | None = None,
    worker_mbps: float | None = None,
) -> ReduceRun:
    """Run ``rounds`` reduce rounds of ``size`` floats on n spawned worker processes.

    Workers listed in ``absent`` are never started (a worker that never arrives): the others
    must fail with TimeoutError after ``timeout_s``. ``worker_mbps`` holds each worker's
    transfers to a function's network bandwidth (``ThrottledStore``). Raises ConfigError for a
    bad argument.
    """
    if n_workers < 1 or size < 0 or rounds < 1:
        raise ConfigError(
            f"run_reduce needs n_workers >= 1, size >= 0, rounds >= 1; got {n_workers}, "
            f"{size}, {rounds}"
        )
    SCHEME_CLASSES.get(scheme)  # an unknown name fails here, listing the choices
    present = [w for w in range(n_workers) if w not in set(absent)]
    namespace = namespace or f"reduce-{uuid.uuid4().hex[:12]}"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(present))
    results = ctx.Queue()
    processes = [
        ctx.Process(
            target=_worker,
            args=(
                store_url,
                scheme,
                n_workers,
                w,
                namespace,
                size,
                rounds,
                seed,
                timeout_s,
                worker_mbps,
                barrier,
                results,
            ),
            name=f"faasml-reduce-{w}",
        )
        for w in present
    ]
    for process in processes:
        process.start()
    outcomes: list[WorkerOutcome] = []
    try:
        deadline = time.monotonic() + 120 + rounds * (timeout_s + 60)
        while len(outcomes) < len(processes):
            try:
                outcomes.append(results.get(timeout=max(deadline - time.monotonic(), 0.1)))
            except queue.Empty:
                dead = [p.name for p in processes if not p.is_alive() and p.exitcode != 0]
                if dead or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"reduce workers {dead or 'all'} ended without reporting"
                    ) from None
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
    return ReduceRun(tuple(sorted(outcomes, key=lambda o: o.worker_id)))
