"""The coordinator's shared state: its options, the record of a running segment, and
``CoordinatorBase`` (what every part of the coordinator reads: platform, stores, meter, budget,
counters, the clock, the store each allocation synchronises through)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import FaasmlError
from faasml.runtime.billing import Meter
from faasml.runtime.estimates import SegmentEstimator
from faasml.runtime.platform import Invocation, Platform
from faasml.runtime.trial import TrialFault, TrialState
from faasml.runtime.worker import ModelRecipe
from faasml.sync.stores import Store
from faasml.types import Allocation


@dataclass(frozen=True)
class CoordinatorOptions:
    max_restarts: int = 3
    """Restarts of one segment before its trial is marked failed."""
    silent_after_s: float = 30.0
    """A worker whose heartbeat is older than this (while its segment runs) is restarted."""
    start_allowance_s: float = 30.0
    """Extra time a worker has for its first heartbeat: a cold start (a process importing
    numpy or torch on a loaded machine) is slow, not silent."""
    sync_timeout_s: float = 30.0
    max_rounds_per_invocation: int | None = None
    """Renew functions after this many rounds (None: from the duration limit)."""
    renew_at: float = 0.7
    """Renew when a segment would use more than this share of the duration limit."""
    epochs_per_segment: int | None = None
    """Whole epochs one invocation may train: None chooses from the measured epoch time and
    the segment's fixed time (``segments.SEGMENT_OVERHEAD_SHARE``); k trains up to k (1: one
    epoch per segment). Never past the end of a stage or the duration limit."""
    poll_s: float = 0.005
    stop_diverged: bool = False
    """Mark a trial 'diverged' at the first epoch whose loss or metric is NaN or infinite and
    train it no further (a worker of several epochs stops at the end of that epoch)."""


@dataclass
class Segment:
    """The n invocations of one trial running from its checkpoint to ``stop_batch``."""

    trial: TrialState
    allocation: Allocation
    invocations: list[Invocation]
    stop_batch: int | None
    checkpoint_out: str
    token: str
    started: float
    estimate_usd: float
    rounds: int
    budget_capped: bool = False
    sync_url: str = ""
    reserve_usd: float = 0.0
    """Most this segment can still bill (its functions are stopped at ``timeout_s``)."""
    timeout_s: float = 0.0
    demand_vcpu_s: float = 0.0
    """vCPUs demanded by every function running beside this segment's (its own included),
    integrated over the time it ran: a machine-bounded platform shares its cores among them."""
    epochs: int = 1
    """Whole epochs the segment trains (more than one for epochs short against its fixed time)."""


TIMINGS = {
    "segments_s": "wall time of finished segments, launch to result handled (they overlap "
    "where trials run side by side)",
    "load_s": "workers' loading: data partition, model, checkpoint (the slowest worker's)",
    "train_s": "workers' training rounds: computation and synchronisation (the slowest's)",
    "end_s": "workers' time besides loading and rounds: evaluation, checkpoint, heartbeat",
    "invoke_s": "invocations' time outside the worker function: transport, unpickling",
    "cold_start_s": "cold starts (the longest of each segment's functions)",
    "notice_s": "segment wall time outside its invocations: dispatch, result handed back, "
    "the coordinator noticing it",
    "launch_s": "the coordinator starting segments (tasks, reservations, invoking)",
    "commit_s": "the coordinator committing segments (history, record, clean-up)",
    "record_s": "writing the run record after segments (part of commit_s)",
    "run_s": "inside Coordinator.run (the stages), the rest of a run is between stages",
    "partition_s": "the coordinator writing the training set's partitions (once per count)",
}
"""The parts of a run's time the coordinator adds up (``CoordinatorBase.timings``)."""


class BudgetExhaustedError(FaasmlError):
    """Internal: the next segment does not fit the budget."""


class CoordinatorBase:
    """The coordinator's state; the parts (launching, failures, results, billing, data)
    build on it."""

    def __init__(
        self,
        platform: Platform,
        catalog: Catalog,
        meter: Meter,
        objects: Store,
        sync_url: str,
        recipe_of: Callable[[TrialState], ModelRecipe],
        *,
        namespace: str,
        budget_usd: float | None = None,
        options: CoordinatorOptions | None = None,
        faults: list[TrialFault] | None = None,
        on_segment: Callable[[TrialState, Segment | None], None] | None = None,
        clock_origin: float | None = None,
        stores: Mapping[str, str] | None = None,
    ) -> None:
        """``sync_url`` is the store gradients go through; ``stores`` maps catalog storage
        names to the stores of those names, for allocations the planner put on them."""
        self.platform = platform
        self.catalog = catalog
        self.meter = meter
        self.objects = objects
        self.sync_url = sync_url
        self.stores = dict(stores or {})
        self.recipe_of = recipe_of
        self.namespace = namespace.rstrip("/")
        self.budget_usd = budget_usd
        self.options = options or CoordinatorOptions()
        self.faults = list(faults or [])
        self.on_segment = on_segment
        self.origin = time.monotonic() if clock_origin is None else clock_origin
        self.samples = 0
        self._prepared: set[int] = set()
        self.partition_mb = 0.0
        """MB of training-set partitions written to the object store."""
        self.estimator = SegmentEstimator(catalog.platform)
        self.stop_reason: str | None = None
        self._server: Any = None
        self._caches: dict[str, Any] = {}
        """Storage name -> the InfiniCache deployment started for it (billed at close)."""
        self._in_use_since: dict[str, float] = {}
        """First use of each storage service, for time-priced ones (billed while in use)."""
        self._silent_checked = 0.0
        self.segments = 0
        self.restarts = 0
        self.memory_moves: list[tuple[int, int, int]] = []
        """(trial, from MB, to MB) of every move after running out of memory."""
        self._unrecorded: list[tuple[TrialState, Segment, str | None]] = []
        """Segments committed to their trials that the run record does not name yet: (trial,
        segment, the checkpoint it replaced, deleted once the record is written)."""
        self._replaced: list[str] = []
        """Checkpoints replaced by recorded segments, deleted at the record's next durable
        write (``release_replaced``)."""
        self.timings: dict[str, float] = dict.fromkeys(TIMINGS, 0.0)
        """Where the run's time went, summed over segments (``TIMINGS``)."""
        self.commits_s: list[float] = []
        self.launches_s: list[float] = []
        """The coordinator's own seconds committing each finished segment (the record's write
        comes after the next launch, not in it) and launching each new one
        (``estimates.coordinator_seconds`` prices them per invocation round)."""

    def now(self) -> float:
        return time.monotonic() - self.origin

    @property
    def predicted_round_s(self) -> Callable[[Allocation], float] | None:
        """The performance model's seconds per round, used until a run measures them."""
        return self.estimator.predicted_round_s

    @predicted_round_s.setter
    def predicted_round_s(self, value: Callable[[Allocation], float] | None) -> None:
        self.estimator.predicted_round_s = value

    def _sync_url(self, allocation: Allocation) -> str:
        """The store of ``allocation``: the one configured under its storage's name, else a
        parameter-server process this coordinator starts on loopback for 'param-server' (the
        VM-PS case), else the default store."""
        configured = self.stores.get(allocation.storage)
        if configured is not None and configured.startswith("infinicache:"):
            return self._cache_url(allocation.storage, configured)
        if configured is not None:
            return configured
        if allocation.scheme != "param-server":
            return self.sync_url
        if self._server is None:
            from faasml.sync.param_server import ParameterServer

            self._server = ParameterServer().start()
        return self._server.url

    def _cache_url(self, name: str, url: str) -> str:
        """The URL workers join: of the InfiniCache deployment this coordinator started for
        ``url`` (one without a host asks for one; stopped and billed at close)."""
        from faasml.sync.stores.infinicache.runs import starts_deployment

        if not starts_deployment(url):
            return url
        if name not in self._caches:
            from faasml.runtime.infinicache import start_infinicache

            self._caches[name] = start_infinicache(url)
        return str(self._caches[name].url)

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        for name, cache in list(self._caches.items()):
            cache.close()  # every node invocation ends and is billed
            self.meter.cache(name, cache.bill(), self.now())
            del self._caches[name]
