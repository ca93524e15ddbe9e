"""What the coordinator's parts share: its options, the record of a running segment, the parts
of a run's time, and ``CoordinatorState`` (options, namespace, stop reason, clock, timings)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from faasml.exceptions import FaasmlError
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.platforms.contract import Invocation
from faasml.types import Allocation


@dataclass(frozen=True)
class CoordinatorOptions:
    max_restarts: int = 3
    """Restarts of one segment before its trial is marked failed."""
    silent_after_s: float = 30.0
    """A worker whose heartbeat is older than this (while its segment runs) is restarted."""
    start_allowance_s: float = 30.0
    """Least time a segment's workers have to start (their first heartbeat): a cold start (a
    process importing numpy or torch on a loaded machine) is slow, not silent. The bound grows
    with the predicted start (``launcher.START_SLACK``) and doubles on each retry after a
    start that outlasted it; the workers wait for each other to start within it."""
    sync_timeout_s: float = 30.0
    max_rounds_per_invocation: int | None = None
    """Renew functions after this many rounds (None: from the duration limit)."""
    renew_at: float = 0.7
    """Renew when a segment would use more than this share of the duration limit."""
    epochs_per_segment: int | None = None
    """Whole epochs one invocation may train: None chooses from the measured epoch time and
    the segment's fixed time (``launcher.SEGMENT_OVERHEAD_SHARE``); k trains up to k (1: one
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
    start_s: float = 0.0
    """How long its workers have to start (0: ``CoordinatorOptions.start_allowance_s``)."""


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
"""The parts of a run's time the coordinator adds up (``CoordinatorState.timings``)."""


class RunClock(Protocol):
    """Where a run's time comes from: the machine's, or a simulator's virtual time (where
    sleeping advances the clock instead of waiting)."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The machine's monotonic clock; sleeping waits."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


class BudgetExhaustedError(FaasmlError):
    """Internal: the next segment does not fit the budget."""


@dataclass
class CoordinatorState:
    """What the coordinator's parts share and a run may change between stages: the options,
    the namespace of the run's keys, why the run stopped, the clock and where time went."""

    options: CoordinatorOptions
    namespace: str
    origin: float
    """``clock.monotonic()`` at the run's time zero (``now``)."""
    stop_reason: str | None = None
    timings: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIMINGS, 0.0))
    """Where the run's time went, summed over segments (``TIMINGS``)."""
    clock: RunClock = SYSTEM_CLOCK
    """The run's clock: every time the coordinator takes or waits on goes through it."""

    def now(self) -> float:
        """Seconds since the run's time zero."""
        return self.clock.monotonic() - self.origin
