"""The job probe's synchronised round: two functions on the job's platform train the job's
model side by side and synchronise every round's real gradient (buffers included, as a
worker sends them) through the job's store, once for each scheme the store offers.

Per round, the *transfer* is the time in the reduce of the function that arrived last (it
waits for no one: only pushing and pulling the bytes) and the *straggler wait* is the mean
time in the reduce less that (the function that arrived first waited for the other). Their
medians go in the job's profile, the wait as a share of a round's computation (it comes from
the functions' computing at different speeds, so it grows as a smaller CPU share slows the
computation: the workload's ``straggler_share``, which eq. 2 adds for n > 1).
``priced_storages`` (pure) solves CE-scaling eq. 3 for each scheme's effective latency per
transfer ℓ so that t^p at n = 2 is the measured transfer, taken back to functions that had
their share of the machine as the compute points are (the planners slow a wave by its
contention κ). The planners then price synchronisation from the measurement, not the catalog's
latency; n > 2 follows eq. 3.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faasml.catalog import Catalog, FunctionPlatform, StorageService
from faasml.job import JobSpec
from faasml.models.perf import network_mbps
from faasml.models.sync import item_mb, transfers
from faasml.runtime.function.probe import WARM_ROUNDS
from faasml.runtime.platforms.contract import FunctionError

SYNC_FN = "faasml.runtime.profile.sync_round:probe_sync"
SYNC_N = 2
"""Functions of the measured round."""
SYNC_MEASURE_S = 0.3
"""Computation the timed rounds of each scheme cover at least (from the solo compute)."""
MIN_ROUNDS, MAX_ROUNDS = 8, 64
"""Timed rounds of each scheme, at least and at most."""
SYNC_TIMEOUT_S = 120.0
"""Longest a function waits in a reduce for the other (its cold start on a busy machine)."""

SyncRound = tuple[str, float, float]
"""(scheme, transfer seconds per round, straggler wait seconds per round) at n = SYNC_N."""


@dataclass(frozen=True)
class SyncMeasurement:
    """What the synchronised round measured ("" and nothing where it was not run)."""

    storage: str = ""
    rounds: tuple[SyncRound, ...] = ()
    straggler_share: float = 0.0
    """The straggler wait over a round's computation (median over the schemes)."""


def probe_sync(payload: dict[str, Any]) -> dict[str, Any]:
    """Inside a function: for each scheme, WARM_ROUNDS synchronised rounds (the first waits
    until the other function is up), then ``rounds`` timed ones; the seconds each spent in
    the reduce, per round."""
    from faasml.runtime.function.worker import cached_dataset, cached_store
    from faasml.sync.schemes import SCHEME_CLASSES

    objects = cached_store(payload["object_url"])
    data, _ = cached_dataset(objects, payload["train_key"])
    sync_store = cached_store(payload["sync_url"])
    index, n = int(payload["index"]), int(payload["n"])
    trainer = _RoundTrainer(payload["recipe"], data, index)
    out: dict[str, list[float]] = {}
    work: dict[str, list[float]] = {}
    for name in payload["schemes"]:
        scheme = SCHEME_CLASSES.get(name)(
            sync_store, n, f"{payload['prefix']}/{name}", timeout_s=SYNC_TIMEOUT_S
        )
        trainer.start(scheme)
        for _ in range(WARM_ROUNDS):
            trainer.round()
        rounds = [trainer.round() for _ in range(int(payload["rounds"]))]
        out[name] = [seconds for _, seconds in rounds]
        work[name] = [compute_s for compute_s, _ in rounds]
    return {"sync_s": out, "compute_s": work}


class _RoundTrainer:
    """Synchronised training rounds of one probing function, as a worker runs them. A user's
    training loop trains in its own code, so its rounds synchronise a zero vector of its
    size (parameters and buffers) and report no computation: the loop's probe measures that."""

    def __init__(self, recipe: Any, data: Any, index: int) -> None:
        import numpy as np

        from faasml.loop import is_loop
        from faasml.runtime.function.probe import warmed
        from faasml.runtime.function.worker import cached_model

        self.data, self.rng = data, np.random.default_rng(index + 1)
        self.index, self.round_id, self.scheme = index, 0, None
        self.loop = is_loop(recipe.model)
        if self.loop:
            self.model = cached_model(recipe)
        else:
            self.model, self.optimizer, self.params, self.size = warmed(recipe, data, self.rng)

    def start(self, scheme: Any) -> None:
        self.scheme, self.round_id = scheme, 0

    def _reduce(self, vector: Any) -> Any:
        import numpy as np

        model, count = self.model, self.model.num_params
        if model.num_buffers and not self.loop:  # buffers travel with the gradient
            vector = np.concatenate([vector, model.buffers()])
        assert self.scheme is not None
        mean = self.scheme.reduce(self.index, self.round_id, vector)
        self.round_id += 1
        if model.num_buffers and not self.loop:
            model.load_buffers(mean[count:])
        return mean[:count]

    def round(self) -> tuple[float, float]:
        """One round: (seconds of computation, seconds in the synchronisation)."""
        import numpy as np

        from faasml.runtime.function.probe import train_round

        if self.loop:
            size = self.model.num_params + self.model.num_buffers
            began = time.perf_counter()
            self._reduce(np.zeros(size, dtype=np.float32))
            return 0.0, time.perf_counter() - began
        self.params, compute_s, seconds = train_round(
            self.model, self.optimizer, self.params, self.data, self.rng, self.size, self._reduce
        )
        return compute_s, seconds


def round_figures(results: Sequence[Mapping[str, Any]]) -> tuple[tuple[SyncRound, ...], float]:
    """(scheme, transfer, straggler wait) per scheme from the functions' reduce times — per
    round the least time in the reduce is the transfer, the mean less it the wait; means
    over the rounds — and the wait's share of a round's computation (the functions' mean),
    the median over the schemes."""
    figures, shares = [], []
    for name in results[0]["sync_s"]:
        rows = list(zip(*(r["sync_s"][name] for r in results), strict=True))
        if not rows:
            continue
        # Means, not medians: an epoch's synchronisation is the sum of its rounds, and a
        # reduce that polls with back-off has a long tail, which a median leaves out.
        transfer = statistics.fmean(min(row) for row in rows)
        wait = max(statistics.fmean(sum(row) / len(row) - min(row) for row in rows), 0.0)
        figures.append((str(name), float(transfer), float(wait)))
        work = list(zip(*(r["compute_s"][name] for r in results), strict=True))
        compute = statistics.fmean(sum(row) / len(row) for row in work)
        shares.append(wait / compute if compute > 0 else 0.0)
    return tuple(figures), float(statistics.median(shares)) if shares else 0.0


def timed_rounds(seconds_per_round: float) -> int:
    """Timed rounds per scheme: SYNC_MEASURE_S of computation, within MIN/MAX_ROUNDS."""
    wanted = math.ceil(SYNC_MEASURE_S / max(seconds_per_round, 1e-6))
    return int(min(MAX_ROUNDS, max(MIN_ROUNDS, wanted)))


@contextlib.contextmanager
def sync_store(job: JobSpec) -> Iterator[tuple[str, str] | None]:
    """(catalog storage name, URL) of the store the job synchronises through, as a run opens
    it: a directory on tmpfs for ``embedded``, a parameter server on loopback for ``vm-ps``
    (stopped after), the job's URL otherwise; None where the probe cannot stand one up (an
    InfiniCache deployment)."""
    name, url = next(iter(job.sync_stores().items()))
    if url is not None and url.startswith("infinicache:"):
        yield None
        return
    if url is not None:
        yield name, url
        return
    if name == "vm-ps":
        from faasml.sync.param_server import ParameterServer

        server = ParameterServer().start()
        try:
            yield name, str(server.url)
        finally:
            server.stop()
        return
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="faasml-probe-sync-", dir=base) as folder:
        yield name, f"embedded://{Path(folder).resolve()}"


def measure_sync(
    job: JobSpec,
    catalog: Catalog,
    call: Callable[[int, list[dict[str, Any]], str], list[dict[str, Any]]],
    memory_mb: int,
    payload: Mapping[str, Any],
    seconds_per_round: float,
) -> SyncMeasurement | None:
    """Run the synchronised round in SYNC_N functions of ``memory_mb`` through ``call`` (the
    probe's: billed as profiling); None where it cannot be run."""
    from faasml.sync.stores import open_store

    with sync_store(job) as found:
        if found is None:
            return None
        name, url = found
        schemes = list(catalog.storage(name).schemes)
        prefix = f"probe-sync-{uuid.uuid4().hex[:8]}"
        body = {
            "object_url": payload["object_url"],
            "train_key": payload["train_key"],
            "recipe": payload["recipes"][0],
            "sync_url": url,
            "schemes": schemes,
            "prefix": prefix,
            "n": SYNC_N,
            "rounds": timed_rounds(seconds_per_round),
        }
        try:
            results = call(memory_mb, [{**body, "index": i} for i in range(SYNC_N)], SYNC_FN)
        finally:
            with contextlib.suppress(Exception), open_store(url) as store:
                store.delete(f"{prefix}/")
        rounds, share = round_figures(results)
        return SyncMeasurement(name, rounds, share)


def measured_sync(
    job: JobSpec,
    catalog: Catalog,
    call: Callable[[int, list[dict[str, Any]], str], list[dict[str, Any]]],
    memory_mb: int,
    payload: Mapping[str, Any],
    first: Mapping[str, Any],
) -> tuple[SyncMeasurement, tuple[str, ...]]:
    """The synchronised round of two functions (``sync_probe``), and a note where it could
    not be measured (the catalog's latency then prices synchronisation)."""
    per_round = float(first["compute_s_per_sample"]) * job.batch_size / SYNC_N  # B/n rows each
    try:
        found = measure_sync(job, catalog, call, memory_mb, payload, per_round)
    except FunctionError as err:
        return SyncMeasurement(), (f"synchronised round not measured ({err.kind}: {err})",)
    if found is None:
        return SyncMeasurement(), ("synchronised round not measured: the store is an InfiniCache",)
    return found, ()


def priced_storages(
    storages: Mapping[str, StorageService],
    platform: FunctionPlatform,
    storage: str,
    memory_mb: int,
    rounds: Sequence[SyncRound],
    model_mb: float,
) -> dict[str, StorageService]:
    """``storages`` with ``storage``'s per-scheme latency ℓ (CE-scaling eq. 3) fitted to the
    measured rounds: transfers(s, 2)·(item/b + ℓ) = transfer / κ, where b is what a function
    of ``memory_mb`` gets from the store and κ the contention of the two functions on
    ``platform`` (1 where it is unbounded); the straggler wait is the workload's
    ``straggler_share``, not the store's. Pure."""
    if storage not in storages or not rounds:
        return dict(storages)
    service = storages[storage]
    kappa = platform.contention(SYNC_N * float(platform.vcpus(memory_mb)))
    bandwidth = float(network_mbps(platform, service, memory_mb))
    latencies = dict(service.scheme_latency_s)
    for scheme, transfer_s, _ in rounds:
        if scheme not in service.schemes:
            continue
        steps = float(transfers(scheme, SYNC_N))
        item = float(item_mb(scheme, SYNC_N, model_mb))
        latencies[scheme] = max(transfer_s / kappa / steps - item / bandwidth, 1e-7)
    return {**storages, storage: dataclasses.replace(service, scheme_latency_s=latencies)}
