"""Reading a run record's parts from JSON, each field checked as it is read (``Fields``): a
wrong one raises a ``RecordError`` naming it and the rule. ``record_json`` reads the whole."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, TypeVar

from faasml._validate import Fields
from faasml.exceptions import RecordError
from faasml.models.calibration import Calibration
from faasml.runtime.coordinator.meter import Charge
from faasml.runtime.profile.record import JobProfile
from faasml.runtime.record.records import (
    TRIAL_STATUSES,
    AllocationChange,
    Best,
    Chunk,
    Estimate,
    Event,
    PhaseRecord,
    PlanRecord,
    ProbeRecord,
    Rejected,
    Reprediction,
    SearchGoal,
    StageRecord,
    Target,
    TrialRecord,
    WorkflowRecord,
)
from faasml.types import Allocation, Constraint, Objective

T = TypeVar("T")
OBJECTIVES = tuple(objective.value for objective in Objective)


def number_of(f: Fields, name: str, *, minimum: float | None = None, finite: bool = True) -> float:
    """A number (``finite`` False: NaN and infinities too, as a loss may be)."""
    if finite:
        return f.number(name, minimum=minimum)
    value = f.raw(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise f.fail(name, value, "must be a number")
    return float(value)


def maybe(f: Fields, name: str, read: Callable[[Fields, str], T]) -> T | None:
    """``read`` of ``name`` where it is there and not null, else None."""
    return None if f.raw(name, None) is None else read(f, name)


def text_of(f: Fields, name: str) -> str:
    value = f.raw(name)
    if not isinstance(value, str):
        raise f.fail(name, value, "must be a string")
    return value


def mapping_of(f: Fields, name: str) -> dict[str, Any]:
    return dict(f.sub(name).data)


def list_of(f: Fields, name: str, read: Callable[[Fields], T]) -> list[T]:
    where = f.path(name)
    return [
        read(Fields(x, f"{where}[{i}]", RecordError))
        for i, x in enumerate(f.items(name, allow_empty=True))
    ]


def allocation_from(f: Fields) -> Allocation:
    allocation = Allocation(
        f.integer("n", minimum=1),
        f.integer("memory_mb", minimum=1),
        f.text("storage"),
        f.text("scheme", "allreduce"),
    )
    if "epoch" in f.data:  # an allocation change: its epoch is read by the caller
        f.raw("epoch")
    f.finish()
    return allocation


def estimate_from(f: Fields, prefix: str) -> Estimate | None:
    time_s, cost = f.raw(f"{prefix}_time_s", None), f.raw(f"{prefix}_cost_usd", None)
    if time_s is None and cost is None:
        return None
    return Estimate(f.number(f"{prefix}_time_s"), f.number(f"{prefix}_cost_usd"))


def stage_from(f: Fields) -> StageRecord:
    factors = f.raw("trial_factors", None)
    if factors is not None:
        ok = isinstance(factors, list) and all(
            isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x < math.inf
            for x in factors
        )
        if not ok:
            raise f.fail("trial_factors", factors, "must be a list of numbers >= 0")
    model = f.raw("model", None)
    stage = StageRecord(
        index=f.integer("index", minimum=0),
        trials=f.integer("trials", minimum=1),
        epochs=f.integer("epochs", minimum=0),
        allocation=allocation_from(f.sub("allocation")),
        epoch_time_s=f.number("epoch_time_s", minimum=0),
        epoch_cost_usd=f.number("epoch_cost_usd", minimum=0),
        time_s=f.number("time_s", minimum=0),
        cost_usd=f.number("cost_usd", minimum=0),
        predicted=estimate_from(f, "predicted"),
        replanned=estimate_from(f, "replanned"),
        repredicted=estimate_from(f, "repredicted"),
        measured=estimate_from(f, "measured"),
        measured_between_s=f.optional_number("measured_between_s", minimum=0),
        prewarm_usd=f.optional_number("prewarm_usd", minimum=0),
        trial_factors=None if factors is None else tuple(float(x) for x in factors),
        batch_size=maybe(f, "batch_size", lambda g, n: g.integer(n, minimum=1)),
        samples=maybe(f, "samples", lambda g, n: g.integer(n, minimum=1)),
        model=None if model is None else mapping_of(f, "model"),
        planned_allocation=maybe(f, "planned_allocation", lambda g, n: allocation_from(g.sub(n))),
    )
    f.finish()
    return stage


def reprediction_from(f: Fields) -> Reprediction:
    value = Reprediction(
        epoch=f.integer("epoch", minimum=1),
        at_s=f.number("at_s", minimum=0),
        spent_usd=f.number("spent_usd", minimum=0),
        rest_epochs=f.integer("rest_epochs", minimum=0),
        rest_time_s=f.number("rest_time_s", minimum=0),
        rest_cost_usd=f.number("rest_cost_usd", minimum=0),
        between_epochs_s=f.number("between_epochs_s", minimum=0),
    )
    f.finish()
    return value


def plan_from(f: Fields) -> PlanRecord:
    stages = list_of(f, "stages", stage_from)
    if not stages:
        raise f.fail("stages", [], "must not be empty")
    plan = PlanRecord(
        planner=f.text("planner"),
        stages=stages,
        time_s=f.number("time_s", minimum=0),
        cost_usd=f.number("cost_usd", minimum=0),
        workload=maybe(f, "workload", text_of),
        predicted=estimate_from(f, "predicted"),
        between_stages_s=f.optional_number("between_stages_s", minimum=0),
        replans=f.integer("replans", 0, minimum=0),
        repredictions=list_of(f, "repredictions", reprediction_from)
        if f.has("repredictions")
        else [],
    )
    f.finish()
    return plan


def epoch_from(f: Fields) -> dict[str, Any]:
    """An epoch of a trial's history, with the fields the runs and reports read checked."""
    f.integer("epoch", minimum=1)
    if f.raw("loss") is not None:  # there; null where not known (a loop that reports none)
        number_of(f, "loss", finite=False)
    for name in ("val_loss", "val_accuracy"):
        if f.raw(name, None) is not None:
            number_of(f, name, finite=False)
    for name in ("t_s", "spent_usd", "epoch_s"):
        f.number(name, minimum=0)
    for name in ("n", "memory_mb"):
        f.integer(name, minimum=1)
    if f.raw("samples_per_s", None) is not None:
        f.number("samples_per_s", minimum=0)
    return dict(f.data)


def trial_from(f: Fields) -> TrialRecord:
    """Each field of ``TrialRecord`` in its order: by its rule in ``TRIAL_READERS``, or, for a
    count (an int with a default), as a whole number not below 0, its default where missing."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(TrialRecord):
        read = TRIAL_READERS.get(field.name)
        if read is not None:
            values[field.name] = read(f, field.name)
        elif field.type == "int" and isinstance(field.default, int):  # annotations are text
            values[field.name] = f.integer(field.name, field.default, minimum=0)
        else:
            raise TypeError(f"trial field {field.name!r} has no rule in TRIAL_READERS")
    f.finish()
    return TrialRecord(**values)


def _checkpoint_of(f: Fields, name: str) -> str | None:
    checkpoint = f.raw(name, None)
    if checkpoint is not None and not isinstance(checkpoint, str):
        raise f.fail(name, checkpoint, "must be a key or null")
    return checkpoint


def _failures_of(f: Fields, name: str) -> tuple[str, ...]:
    failures = f.items(name, allow_empty=True) if f.has(name) else []
    if not all(isinstance(x, str) for x in failures):
        raise f.fail(name, failures, "must be a list of texts")
    return tuple(failures)


def _partial_of(f: Fields, name: str) -> dict[str, float]:
    partial = f.sub(name, {})
    for key in partial.data:
        partial.number(key)
    return dict(partial.data)


TRIAL_READERS: dict[str, Callable[[Fields, str], Any]] = {
    "trial_id": lambda f, name: f.integer(name, minimum=0),
    "config": mapping_of,
    "checkpoint": _checkpoint_of,
    "status": lambda f, name: f.choice(name, TRIAL_STATUSES),
    "history": lambda f, name: tuple(list_of(f, name, epoch_from)) if f.has(name) else (),
    "failures": _failures_of,
    "partial": _partial_of,
    "diverged_epoch": lambda f, name: maybe(f, name, lambda g, n: g.integer(n, minimum=1)),
}
"""How ``trial_from`` reads and checks each ``TrialRecord`` field that is not a plain count."""


def charge_from(f: Fields) -> Charge:
    detail = f.raw("detail", "")
    if not isinstance(detail, str):
        raise f.fail("detail", detail, "must be a string")
    charge = Charge(
        f.number("t_s"), f.text("kind"), f.number("usd", minimum=0), f.integer("trial", -1), detail
    )
    f.finish()
    return charge


def event_from(f: Fields) -> Event:
    event = Event(f.number("t_s"), text_of(f, "text"))
    f.finish()
    return event


def best_from(f: Fields) -> Best:
    def loss(g: Fields, name: str) -> float:
        return number_of(g, name, finite=False)

    checkpoint = maybe(f, "checkpoint", text_of)
    best = Best(
        trial=f.integer("trial", minimum=0),
        config=mapping_of(f, "config"),
        metric=f.text("metric"),
        val_loss=maybe(f, "val_loss", loss),
        val_accuracy=maybe(f, "val_accuracy", loss),
        checkpoint=checkpoint,
        epochs=maybe(f, "epochs", lambda g, n: g.integer(n, minimum=0)),
        mode=maybe(f, "mode", lambda g, n: g.choice(n, ("min", "max"))),
        value=maybe(f, "value", loss),
    )
    f.finish()
    return best


def target_from(f: Fields) -> Target:
    target = Target(f.number("loss"), f.boolean("reached"), number_of(f, "last", finite=False))
    f.finish()
    return target


def profile_from(f: Fields) -> JobProfile:
    """The job profile a record holds, or a one-line error naming the fix."""
    try:
        profile = JobProfile.from_dict(f.raw("profile"), cached=True)
        float(profile.memory_floor_mb())
        if not all(m > 0 and s > 0 for m, s in profile.compute_points):
            raise ValueError("compute_points must be positive")
    except (TypeError, ValueError, AttributeError, KeyError) as err:
        raise RecordError(
            f"its 'profile' is malformed ({type(err).__name__}: {err}); remove it to resume "
            "planning from the job's named profile"
        ) from None
    return profile


def calibration_from(f: Fields) -> Calibration:
    try:
        calibration = Calibration.from_dict(f.raw("calibration"))
        for memory, values in calibration.samples.items():
            if memory < 1 or not all(math.isfinite(v) and v >= 0 for v in values):
                raise ValueError(memory)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        raise RecordError(
            "its 'calibration' is malformed (memory MB -> [measured seconds per MB, vCPU "
            "demand]); remove it to resume without"
        ) from None
    return calibration


def counts_by_memory(f: Fields, name: str) -> dict[int, int]:
    sub = f.sub(name)
    out = {}
    for key in sub.data:
        if not key.isdigit() or int(key) < 1:
            raise sub.fail(key, key, "must be named by a memory size in MB")
        out[int(key)] = sub.integer(key, minimum=0)
    return out


def texts_of(f: Fields, name: str) -> dict[str, str]:
    sub = f.sub(name)
    return {key: text_of(sub, key) for key in sub.data}


def numbers_of(f: Fields, name: str) -> dict[str, float]:
    sub = f.sub(name)
    return {key: sub.number(key, minimum=0) for key in sub.data}


def options_of(f: Fields, name: str) -> dict[str, str | int | float | bool]:
    sub = f.sub(name, {})
    for key, value in sub.data.items():
        if not isinstance(value, str | int | float | bool):
            raise sub.fail(key, value, "must be a plain value (text, number, true/false)")
    return dict(sub.data)


def constraint_from(f: Fields) -> Constraint:
    c = f.sub("constraint")
    constraint = Constraint(
        c.optional_number("budget_usd", minimum=0, strict_minimum=True),
        c.optional_number("deadline_s", minimum=0, strict_minimum=True),
        Objective(c.choice("objective", OBJECTIVES)),
    )
    c.finish()
    return constraint


def allocation_change_from(f: Fields) -> AllocationChange:
    return AllocationChange(f.integer("epoch", minimum=1), allocation_from(f))


def phase_goal_from(f: Fields) -> SearchGoal:
    goal = SearchGoal(
        Objective(f.choice("objective", OBJECTIVES)),
        f.number("epochs", minimum=0),
        f.optional_number("limit", minimum=0),
    )
    f.finish()
    return goal


def probe_from(f: Fields) -> ProbeRecord:
    failed = maybe(f, "failed", text_of)
    measured = [f.optional_number(n, minimum=0) for n in ("epoch_s", "epoch_usd", "samples_per_s")]
    if failed is None and None in measured:
        raise f.fail("epoch_s", f.raw("epoch_s"), "must be a number where the probe did not fail")
    probe = ProbeRecord(
        allocation_from(f.sub("allocation")),
        measured[0],
        measured[1],
        measured[2],
        f.number("predicted_epoch_s", minimum=0),
        f.number("probe_s", minimum=0),
        f.number("probe_usd", minimum=0),
        failed,
        maybe(f, "rounds", lambda g, n: g.integer(n, minimum=1)),
    )
    f.finish()
    return probe


def chunk_from(f: Fields) -> Chunk:
    chunk = Chunk(f.text("file"), f.integer("samples", minimum=0), text_of(f, "change"))
    f.finish()
    return chunk


def rejected_from(f: Fields) -> Rejected:
    rejected = Rejected(f.text("file"), text_of(f, "reason"))
    f.finish()
    return rejected


def phase_from(f: Fields) -> PhaseRecord:
    phase = PhaseRecord(
        index=f.integer("index", minimum=1),
        change=text_of(f, "change"),
        batch_size=f.integer("batch_size", minimum=1),
        samples=f.integer("samples", minimum=1),
        model=mapping_of(f, "model"),
        model_mb=f.number("model_mb", minimum=0),
        params=f.integer("params", minimum=0),
        epochs=f.integer("epochs", minimum=0),
        trial=f.integer("trial", minimum=0),
        t_start_s=f.number("t_start_s", minimum=0),
        goal=phase_goal_from(f.sub("goal")),
        probes=list_of(f, "probes", probe_from),
        stop_reason=maybe(f, "stop_reason", text_of),
        searched=f.boolean("searched", False),
        retrigger=f.boolean("retrigger", False),
        choice=maybe(f, "choice", lambda g, n: allocation_from(g.sub(n))),
        search_usd=f.number("search_usd", 0.0, minimum=0),
        search_s=f.number("search_s", 0.0, minimum=0),
        train_from_usd=f.optional_number("train_from_usd", minimum=0),
        t_end_s=f.optional_number("t_end_s", minimum=0),
        train_usd=f.optional_number("train_usd", minimum=0),
        epochs_run=list_of(f, "epochs_run", epoch_from) if f.has("epochs_run") else [],
    )
    f.finish()
    return phase


def workflow_from(f: Fields) -> WorkflowRecord:
    flow = WorkflowRecord(
        kind=f.text("kind"),
        phases=list_of(f, "phases", phase_from),
        current=maybe(f, "current", lambda g, n: phase_from(g.sub(n))),
        origin_s=f.optional_number("origin_s", minimum=0),
        chunks=list_of(f, "chunks", chunk_from) if f.has("chunks") else [],
        rejected=list_of(f, "rejected", rejected_from) if f.has("rejected") else [],
    )
    f.finish()
    return flow
