"""The run record, typed: what a tuning or training run writes to ``record.json`` and a resumed
run, the report and the console read back.

A run holds one ``RunRecord`` and changes it as it goes (the plan's stages are measured, trials
advance, charges and events accrue); ``record_json`` is its one way in and out of JSON, which
validates a record as it reads it. A stage keeps what the run planned, re-predicted and
measured of it as separate fields, so none overwrites another.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from faasml.models.calibration import Calibration
from faasml.runtime.coordinator.meter import Charge
from faasml.runtime.coordinator.trial import TrialState, plain_copy
from faasml.runtime.profile.record import JobProfile
from faasml.types import Allocation, Constraint, Objective

__all__ = [
    "KINDS",
    "OMIT_AT_DEFAULT",
    "RUN_STATUSES",
    "TRIAL_STATUSES",
    "AllocationChange",
    "Best",
    "Charge",
    "Chunk",
    "Estimate",
    "Event",
    "PhaseRecord",
    "PlanRecord",
    "ProbeRecord",
    "Rejected",
    "Reprediction",
    "RunRecord",
    "SearchGoal",
    "StageRecord",
    "Target",
    "TrialRecord",
    "WorkflowRecord",
]

KINDS = ("tune", "train")
RUN_STATUSES = (
    "planned",
    "running",
    "stopped",
    "interrupted",
    "finished",
    "target-missed",
    "failed",
)
TRIAL_STATUSES = ("pending", "running", "done", "stopped", "failed", "pruned", "diverged")
"""pending, running, done (reached its epochs), stopped (by the run), failed (restarted past
the limit), pruned (ranked out), diverged (its loss went NaN or infinite)."""


@dataclass(frozen=True)
class Estimate:
    """A time and a bill (of a stage: as planned, re-predicted or measured)."""

    time_s: float
    cost_usd: float


@dataclass
class StageRecord:
    """One stage of a plan: its trials, epochs and allocation, and its time and bill as the
    planner planned, as the run predicted (and re-predicted after re-calibration) and as
    measured, each a field of its own."""

    index: int
    trials: int
    epochs: int
    allocation: Allocation
    epoch_time_s: float
    epoch_cost_usd: float
    time_s: float
    """The planner's figures (a re-plan's for a stage re-planned)."""
    cost_usd: float
    predicted: Estimate | None = None
    """The run's own prediction before it ran (a re-plan keeps it)."""
    replanned: Estimate | None = None
    """The run's prediction of a stage re-planned during the run."""
    repredicted: Estimate | None = None
    measured: Estimate | None = None
    measured_between_s: float | None = None
    """The run's own time after the stage (ranking, re-calibration, the record)."""
    prewarm_usd: float | None = None
    """The stage's functions started (and billed) during the stage before."""
    trial_factors: tuple[float, ...] | None = None
    """Each trial's training cost over their mean, where known (``config_cost``)."""
    batch_size: int | None = None
    """A workflow phase's batch size, training samples and model (None: not a workflow's)."""
    samples: int | None = None
    model: dict[str, Any] | None = None
    planned_allocation: Allocation | None = None
    """The planner's allocation where the run moved the stage onto the one before's (whose
    functions are warm): the planner's figures are for it."""

    def run_estimate(self) -> Estimate | None:
        """The run's prediction as last (re-)planned: its re-calibration's reference."""
        return self.replanned or self.predicted


@dataclass(frozen=True)
class Reprediction:
    """A training run's rest, re-predicted after an epoch's re-calibration."""

    epoch: int
    at_s: float
    spent_usd: float
    rest_epochs: int
    rest_time_s: float
    rest_cost_usd: float
    between_epochs_s: float


@dataclass
class PlanRecord:
    """The plan a run follows: its stages and their totals."""

    planner: str
    stages: list[StageRecord]
    time_s: float
    cost_usd: float
    workload: str | None = None
    predicted: Estimate | None = None
    """The run's own prediction beside the planner's figures (a tuning run's: the functions
    warm between stages, prewarming, the partitions' writes and its time between stages)."""
    between_stages_s: float | None = None
    """The run's own time between two stages, as planning took (a tuning plan's)."""
    replans: int = 0
    repredictions: list[Reprediction] = field(default_factory=list)


@dataclass(frozen=True)
class Event:
    t_s: float
    text: str


@dataclass(frozen=True)
class Best:
    """The best trial so far and where its checkpoint is."""

    trial: int
    config: dict[str, Any]
    metric: str
    val_loss: float | None
    val_accuracy: float | None
    checkpoint: str | None
    epochs: int | None = None
    mode: str | None = None
    """'min' or 'max': how ``metric`` ranked (None in a record written before modes)."""
    value: float | None = None
    """The best trial's value of ``metric`` (None in a record written before it)."""


@dataclass(frozen=True)
class Target:
    """A training run's target loss and whether the last validation loss reached it."""

    loss: float
    reached: bool
    last: float


@dataclass(frozen=True)
class AllocationChange:
    """A training run's allocation from ``epoch`` on."""

    epoch: int
    allocation: Allocation


OMIT_AT_DEFAULT = {"json": "omit at default"}
"""A trial field's metadata: ``record.json`` leaves it out at its default. The fields added
after the first records were written have it, so that those records write back unchanged."""


@dataclass(frozen=True)
class TrialRecord:
    """A trial as the record keeps it, and the one definition of a trial's fields: their
    types, defaults, meaning and JSON form. ``TrialState`` (the live, mutable trial) restates
    the names only because the type checker needs them; a test keeps the two equal, and the
    conversions both ways and the JSON are made from ``dataclasses.fields`` of this class."""

    trial_id: int
    config: dict[str, Any]
    epochs_done: int = 0
    epoch: int = 0
    batch: int = 0
    round_id: int = 0
    checkpoint: str | None = None
    status: str = "pending"
    """One of ``TRIAL_STATUSES``."""
    history: tuple[dict[str, Any], ...] = ()
    """One record per epoch trained (not changed once here)."""
    restarts: int = 0
    failures: tuple[str, ...] = ()
    partial: dict[str, float] = field(default_factory=dict)
    """Loss sum and samples of the epoch in progress (segments of a renewed epoch)."""
    memory_mb: int = 0
    """Memory the trial was moved to after running out of it (0: the plan's), kept so that a
    resumed run does not start it again where it cannot fit."""
    diverged_epoch: int | None = field(default=None, metadata=OMIT_AT_DEFAULT)
    """The first epoch whose loss or metric was NaN or infinite (status 'diverged')."""
    functions: int = field(default=0, metadata=OMIT_AT_DEFAULT)
    """Most functions the trial runs on after repeated synchronisation failures moved it to
    fewer (0: the plan's), kept as ``memory_mb`` is."""

    @staticmethod
    def of(trial: TrialState) -> TrialRecord:
        """A snapshot of a live trial (epoch records are not changed once in its history)."""
        return TrialRecord(**{f.name: _frozen(getattr(trial, f.name)) for f in fields(TrialRecord)})

    def state(self) -> TrialState:
        """The live trial a resumed run continues (its own copy of every list and mapping)."""
        return TrialState(**{f.name: _live(getattr(self, f.name)) for f in fields(self)})

    @property
    def last(self) -> dict[str, Any]:
        return self.history[-1] if self.history else {}


def _frozen(value: Any) -> Any:
    """A live trial's field as the record keeps it: lists as tuples, mappings copied."""
    if isinstance(value, list):
        return tuple(value)
    return dict(value) if isinstance(value, dict) else value


def _live(value: Any) -> Any:
    """A recorded trial's field as a live trial holds it: tuples as lists of copies."""
    return plain_copy(list(value) if isinstance(value, tuple) else value)


@dataclass(frozen=True)
class SearchGoal:
    """A workflow phase's deployment goal: the objective, its epochs, the limit left."""

    objective: Objective
    epochs: float
    limit: float | None


@dataclass(frozen=True)
class ProbeRecord:
    """One billed probe of a deployment search; the measured figures are None where it failed."""

    allocation: Allocation
    epoch_s: float | None
    epoch_usd: float | None
    samples_per_s: float | None
    predicted_epoch_s: float
    probe_s: float
    probe_usd: float
    failed: str | None
    rounds: int | None = None
    """The rounds it ran where the search shortened it to fit its dollars (None: in full)."""


@dataclass
class PhaseRecord:
    """A workflow phase: what it trained, its search and its training."""

    index: int
    change: str
    batch_size: int
    samples: int
    model: dict[str, Any]
    model_mb: float
    params: int
    epochs: int
    trial: int
    t_start_s: float
    goal: SearchGoal
    probes: list[ProbeRecord] = field(default_factory=list)
    stop_reason: str | None = None
    searched: bool = False
    retrigger: bool = False
    choice: Allocation | None = None
    """The allocation chosen (None: its search not finished yet)."""
    search_usd: float = 0.0
    search_s: float = 0.0
    train_from_usd: float | None = None
    """The bill when its training started (while it trains, or was stopped training)."""
    t_end_s: float | None = None
    train_usd: float | None = None
    epochs_run: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Chunk:
    """A chunk file a watched-folder workflow trained on."""

    file: str
    samples: int
    change: str


@dataclass(frozen=True)
class Rejected:
    """A chunk file a watched-folder workflow refused, and why."""

    file: str
    reason: str


@dataclass
class WorkflowRecord:
    """A workflow run's phases: those done, the one under way, the chunk files taken."""

    kind: str
    phases: list[PhaseRecord] = field(default_factory=list)
    current: PhaseRecord | None = None
    origin_s: float | None = None
    chunks: list[Chunk] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def all_phases(self) -> list[PhaseRecord]:
        """The finished phases and the one under way when the run stopped (if any)."""
        return [*self.phases, *([self.current] if self.current is not None else [])]


@dataclass
class RunRecord:
    """A run's record: the job and constraint, the plan, trials, bill, events and outcome."""

    kind: str
    job: dict[str, Any]
    """The job as a mapping (passwords redacted), which a resume reads where its file is gone."""
    job_source: str | None
    constraint: Constraint
    catalog: str
    platform: str
    platform_options: dict[str, str | int | float | bool] = field(default_factory=dict)
    status: str = "planned"
    trials: list[TrialRecord] = field(default_factory=list)
    charges: list[Charge] = field(default_factory=list)
    elapsed_s: float = 0.0
    events: list[Event] = field(default_factory=list)
    profile: JobProfile | None = None
    profile_cached: bool | None = None
    coordinator_s: float | None = None
    compute_factor: float | None = None
    probe_warm: dict[int, int] | None = None
    plan: PlanRecord | None = None
    """None until planned (a record saved before: a resume plans afresh)."""
    stage: int = 0
    """The tuning stage under way (the count done)."""
    enforcement: dict[str, str] | None = None
    restarts: int = 0
    segments: int = 0
    cold_starts: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    best: Best | None = None
    calibration: Calibration | None = None
    partition_write_mbps: float | None = None
    target: Target | None = None
    outcome: str | None = None
    allocation: Allocation | None = None
    """A training run's allocation now."""
    allocations: list[AllocationChange] = field(default_factory=list)
    workflow: WorkflowRecord | None = None
    waiting_s: float = 0.0
    """Time a workflow waited for data, no function held."""
    stop_reason: str | None = None
    job_file_sha256: str | None = None
    """The job file's digest as the run began (a resume refuses a file edited since)."""
    job_signature: str | None = None
    """The user's signature of a job that names code (``runtime.job_guard``)."""

    @property
    def job_name(self) -> str:
        name = self.job.get("name", "")
        return name if isinstance(name, str) else ""

    def run_usd(self) -> float:
        """The bill less measuring the job (what the plan predicts)."""
        return sum(c.usd for c in self.charges if c.kind != "profiling")

    def bill_usd(self) -> float:
        return sum(c.usd for c in self.charges)

    def usd_of(self, kind: str) -> float:
        return sum(c.usd for c in self.charges if c.kind == kind)
