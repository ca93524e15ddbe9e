"""The run record in and out of JSON, in one place: ``record_to_json`` writes the current
``SCHEMA_VERSION``; ``record_from_json`` migrates an older record (those written before the
field, version 0, have the same shape) and validates every field, and the fields against each
other, raising one ``RecordError`` line that names the first wrong one."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from faasml._validate import Fields, shown
from faasml.exceptions import ConfigError, RecordError
from faasml.runtime.billing import Charge
from faasml.runtime.calibration import Calibration
from faasml.runtime.profile_record import JobProfile
from faasml.runtime.record import (
    KINDS,
    RUN_STATUSES,
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
    RunRecord,
    SearchGoal,
    StageRecord,
    Target,
    TrialRecord,
    WorkflowRecord,
)
from faasml.types import Allocation, Constraint, Objective

SCHEMA_VERSION = 1
"""1: the record names its version (version 0, before the field, has the same shape)."""

T = TypeVar("T")
_OBJECTIVES = tuple(objective.value for objective in Objective)


# ---------------------------------------------------------------------------------------- out


def constraint_json(constraint: Constraint) -> dict[str, Any]:
    return {
        "budget_usd": constraint.budget_usd,
        "deadline_s": constraint.deadline_s,
        "objective": constraint.goal.value,
    }


def _estimate_json(out: dict[str, Any], prefix: str, value: Estimate | None) -> None:
    if value is not None:
        out[f"{prefix}_time_s"], out[f"{prefix}_cost_usd"] = value.time_s, value.cost_usd


def stage_json(stage: StageRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": stage.index,
        "trials": stage.trials,
        "epochs": stage.epochs,
        "allocation": dataclasses.asdict(stage.allocation),
        "epoch_time_s": stage.epoch_time_s,
        "epoch_cost_usd": stage.epoch_cost_usd,
        "time_s": stage.time_s,
        "cost_usd": stage.cost_usd,
    }
    _estimate_json(out, "predicted", stage.planned)
    _estimate_json(out, "repredicted", stage.repredicted)
    _estimate_json(out, "measured", stage.measured)
    optional = {
        "measured_between_s": stage.measured_between_s,
        "prewarm_usd": stage.prewarm_usd,
        "trial_factors": None if stage.trial_factors is None else list(stage.trial_factors),
        "batch_size": stage.batch_size,
        "samples": stage.samples,
        "model": stage.model,
    }
    out.update({key: value for key, value in optional.items() if value is not None})
    return out


def _plan_json(plan: PlanRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "planner": plan.planner,
        "stages": [stage_json(s) for s in plan.stages],
        "time_s": plan.time_s,
        "cost_usd": plan.cost_usd,
    }
    if plan.workload is not None:
        out["workload"] = plan.workload
    if plan.between_stages_s is not None:
        out["between_stages_s"] = plan.between_stages_s
    if plan.replans:
        out["replans"] = plan.replans
    if plan.repredictions:
        out["repredictions"] = [dataclasses.asdict(r) for r in plan.repredictions]
    return out


def _trial_json(trial: TrialRecord) -> dict[str, Any]:
    out = {
        "trial_id": trial.trial_id,
        "config": dict(trial.config),
        "epochs_done": trial.epochs_done,
        "epoch": trial.epoch,
        "batch": trial.batch,
        "round_id": trial.round_id,
        "checkpoint": trial.checkpoint,
        "status": trial.status,
        "history": list(trial.history),
        "restarts": trial.restarts,
        "failures": list(trial.failures),
        "partial": dict(trial.partial),
        "memory_mb": trial.memory_mb,
    }
    if trial.diverged_epoch is not None:
        out["diverged_epoch"] = trial.diverged_epoch
    return out


def _phase_json(phase: PhaseRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": phase.index,
        "change": phase.change,
        "batch_size": phase.batch_size,
        "samples": phase.samples,
        "model": phase.model,
        "model_mb": phase.model_mb,
        "params": phase.params,
        "epochs": phase.epochs,
        "trial": phase.trial,
        "t_start_s": phase.t_start_s,
        "goal": {
            "objective": phase.goal.objective.value,
            "epochs": phase.goal.epochs,
            "limit": phase.goal.limit,
        },
        "probes": [
            {**dataclasses.asdict(p), "allocation": dataclasses.asdict(p.allocation)}
            for p in phase.probes
        ],
        "searched": phase.searched,
        "retrigger": phase.retrigger,
        "search_usd": phase.search_usd,
        "search_s": phase.search_s,
        "epochs_run": list(phase.epochs_run),
    }
    optional = {
        "stop_reason": phase.stop_reason,
        "choice": None if phase.choice is None else dataclasses.asdict(phase.choice),
        "train_from_usd": phase.train_from_usd,
        "t_end_s": phase.t_end_s,
        "train_usd": phase.train_usd,
    }
    out.update({key: value for key, value in optional.items() if value is not None})
    return out


def _workflow_json(flow: WorkflowRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": flow.kind, "phases": [_phase_json(p) for p in flow.phases]}
    if flow.current is not None:
        out["current"] = _phase_json(flow.current)
    if flow.origin_s is not None:
        out["origin_s"] = flow.origin_s
    out["chunks"] = [dataclasses.asdict(c) for c in flow.chunks]
    out["rejected"] = [dataclasses.asdict(r) for r in flow.rejected]
    return out


def record_to_json(record: RunRecord) -> dict[str, Any]:
    """The record as plain JSON values (``record.json``'s form), with its schema version."""
    r = record
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": r.kind,
        "job": r.job,
        "job_source": r.job_source,
        "constraint": constraint_json(r.constraint),
        "catalog": r.catalog,
        "platform": r.platform,
        "platform_options": dict(r.platform_options),
        "status": r.status,
        "trials": [_trial_json(t) for t in r.trials],
        "charges": [dict(vars(c)) for c in r.charges],
        "elapsed_s": r.elapsed_s,
        "events": [{"t_s": e.t_s, "text": e.text} for e in r.events],
        "restarts": r.restarts,
        "segments": r.segments,
        "cold_starts": r.cold_starts,
    }
    optional: dict[str, Any] = {
        "profile": None if r.profile is None else r.profile.to_dict(),
        "profile_cached": r.profile_cached,
        "coordinator_s": r.coordinator_s,
        "compute_factor": r.compute_factor,
        "probe_warm": None
        if r.probe_warm is None
        else {str(m): c for m, c in r.probe_warm.items()},
        "plan": None if r.plan is None else _plan_json(r.plan),
        "stage": r.stage if r.plan is not None and r.kind == "tune" else None,
        "enforcement": r.enforcement,
        "timings": r.timings or None,
        "best": None if r.best is None else _best_json(r.best),
        "calibration": None if r.calibration is None else r.calibration.to_dict(),
        "partition_write_mbps": r.partition_write_mbps,
        "target": None if r.target is None else dataclasses.asdict(r.target),
        "outcome": r.outcome,
        "allocation": None if r.allocation is None else dataclasses.asdict(r.allocation),
        "allocations": [
            {"epoch": a.epoch, **dataclasses.asdict(a.allocation)} for a in r.allocations
        ]
        if r.allocation is not None
        else None,
        "workflow": None if r.workflow is None else _workflow_json(r.workflow),
        "waiting_s": r.waiting_s or None,
        "stop_reason": r.stop_reason,
    }
    out.update({key: value for key, value in optional.items() if value is not None})
    return out


def _best_json(best: Best) -> dict[str, Any]:
    out = dataclasses.asdict(best)
    if best.epochs is None:
        del out["epochs"]
    return out


# ----------------------------------------------------------------------------------------- in


def migrate(data: object) -> object:
    """``data`` in the current schema: version 0 (no ``schema_version``) reads as it is."""
    if not isinstance(data, Mapping):
        return data
    version = data.get("schema_version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise RecordError(
            f"the value of record.schema_version is {shown(version)}, but must be a whole "
            f"number from 0 to {SCHEMA_VERSION}"
        )
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"the record has schema_version {version}: written by a newer faasml (this one "
            f"reads up to {SCHEMA_VERSION}); upgrade faasml to resume or report it"
        )
    return {**data, "schema_version": SCHEMA_VERSION}


def record_from_json(data: object) -> RunRecord:
    """A record from its JSON form, migrated and validated: a damaged one raises one
    ``RecordError`` line naming the field and the rule."""
    try:
        record = _record(Fields(migrate(data), "record", RecordError))
        _check_together(record)
    except RecordError:
        raise
    except ConfigError as err:  # a value's own check (an allocation, a constraint)
        raise RecordError(str(err)) from None
    return record


def _number(f: Fields, name: str, *, minimum: float | None = None, finite: bool = True) -> float:
    """A number (``finite`` False: NaN and infinities too, as a loss may be)."""
    if finite:
        return f.number(name, minimum=minimum)
    value = f.raw(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise f.fail(name, value, "must be a number")
    return float(value)


def _maybe(f: Fields, name: str, read: Callable[[Fields, str], T]) -> T | None:
    """``read`` of ``name`` where it is there and not null, else None."""
    return None if f.raw(name, None) is None else read(f, name)


def _str(f: Fields, name: str) -> str:
    value = f.raw(name)
    if not isinstance(value, str):
        raise f.fail(name, value, "must be a string")
    return value


def _mapping(f: Fields, name: str) -> dict[str, Any]:
    return dict(f.sub(name).data)


def _list(f: Fields, name: str, read: Callable[[Fields], T]) -> list[T]:
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


def _estimate(f: Fields, prefix: str) -> Estimate | None:
    time_s, cost = f.raw(f"{prefix}_time_s", None), f.raw(f"{prefix}_cost_usd", None)
    if time_s is None and cost is None:
        return None
    return Estimate(f.number(f"{prefix}_time_s"), f.number(f"{prefix}_cost_usd"))


def _stage(f: Fields) -> StageRecord:
    factors = f.raw("trial_factors", None)
    if factors is not None:
        ok = isinstance(factors, list) and all(
            isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in factors
        )
        if not ok:
            raise f.fail("trial_factors", factors, "must be a list of positive numbers")
    model = f.raw("model", None)
    stage = StageRecord(
        index=f.integer("index", minimum=0),
        trials=f.integer("trials", minimum=1),
        epochs=f.integer("epochs", minimum=1),
        allocation=allocation_from(f.sub("allocation")),
        epoch_time_s=f.number("epoch_time_s", minimum=0),
        epoch_cost_usd=f.number("epoch_cost_usd", minimum=0),
        time_s=f.number("time_s", minimum=0),
        cost_usd=f.number("cost_usd", minimum=0),
        planned=_estimate(f, "predicted"),
        repredicted=_estimate(f, "repredicted"),
        measured=_estimate(f, "measured"),
        measured_between_s=f.optional_number("measured_between_s", minimum=0),
        prewarm_usd=f.optional_number("prewarm_usd", minimum=0),
        trial_factors=None if factors is None else tuple(float(x) for x in factors),
        batch_size=_maybe(f, "batch_size", lambda g, n: g.integer(n, minimum=1)),
        samples=_maybe(f, "samples", lambda g, n: g.integer(n, minimum=1)),
        model=None if model is None else _mapping(f, "model"),
    )
    f.finish()
    return stage


def _reprediction(f: Fields) -> Reprediction:
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


def _plan(f: Fields) -> PlanRecord:
    stages = _list(f, "stages", _stage)
    if not stages:
        raise f.fail("stages", [], "must not be empty")
    plan = PlanRecord(
        planner=f.text("planner"),
        stages=stages,
        time_s=f.number("time_s", minimum=0),
        cost_usd=f.number("cost_usd", minimum=0),
        workload=_maybe(f, "workload", _str),
        between_stages_s=f.optional_number("between_stages_s", minimum=0),
        replans=f.integer("replans", 0, minimum=0),
        repredictions=_list(f, "repredictions", _reprediction) if f.has("repredictions") else [],
    )
    f.finish()
    return plan


def _epoch_record(f: Fields) -> dict[str, Any]:
    """An epoch of a trial's history, with the fields the runs and reports read checked."""
    f.integer("epoch", minimum=1)
    _number(f, "loss", finite=False)
    for name in ("val_loss", "val_accuracy"):
        if f.raw(name, None) is not None:
            _number(f, name, finite=False)
    for name in ("t_s", "spent_usd", "epoch_s"):
        f.number(name, minimum=0)
    for name in ("n", "memory_mb"):
        f.integer(name, minimum=1)
    if f.raw("samples_per_s", None) is not None:
        f.number("samples_per_s", minimum=0)
    return dict(f.data)


def _trial(f: Fields) -> TrialRecord:
    checkpoint = f.raw("checkpoint", None)
    if checkpoint is not None and not isinstance(checkpoint, str):
        raise f.fail("checkpoint", checkpoint, "must be a key or null")
    failures = f.items("failures", allow_empty=True) if f.has("failures") else []
    if not all(isinstance(x, str) for x in failures):
        raise f.fail("failures", failures, "must be a list of texts")
    partial = f.sub("partial", {})
    for key in partial.data:
        partial.number(key)
    trial = TrialRecord(
        trial_id=f.integer("trial_id", minimum=0),
        config=_mapping(f, "config"),
        epochs_done=f.integer("epochs_done", 0, minimum=0),
        epoch=f.integer("epoch", 0, minimum=0),
        batch=f.integer("batch", 0, minimum=0),
        round_id=f.integer("round_id", 0, minimum=0),
        checkpoint=checkpoint,
        status=f.choice("status", TRIAL_STATUSES),
        history=tuple(_list(f, "history", _epoch_record)) if f.has("history") else (),
        restarts=f.integer("restarts", 0, minimum=0),
        failures=tuple(failures),
        partial=dict(partial.data),
        memory_mb=f.integer("memory_mb", 0, minimum=0),
        diverged_epoch=_maybe(f, "diverged_epoch", lambda g, n: g.integer(n, minimum=1)),
    )
    f.finish()
    return trial


def _charge(f: Fields) -> Charge:
    detail = f.raw("detail", "")
    if not isinstance(detail, str):
        raise f.fail("detail", detail, "must be a string")
    charge = Charge(
        f.number("t_s"), f.text("kind"), f.number("usd", minimum=0), f.integer("trial", -1), detail
    )
    f.finish()
    return charge


def _event(f: Fields) -> Event:
    event = Event(f.number("t_s"), _str(f, "text"))
    f.finish()
    return event


def _best(f: Fields) -> Best:
    def loss(g: Fields, name: str) -> float:
        return _number(g, name, finite=False)

    checkpoint = _maybe(f, "checkpoint", _str)
    best = Best(
        trial=f.integer("trial", minimum=0),
        config=_mapping(f, "config"),
        metric=f.text("metric"),
        val_loss=_maybe(f, "val_loss", loss),
        val_accuracy=_maybe(f, "val_accuracy", loss),
        checkpoint=checkpoint,
        epochs=_maybe(f, "epochs", lambda g, n: g.integer(n, minimum=0)),
    )
    f.finish()
    return best


def _target(f: Fields) -> Target:
    target = Target(f.number("loss"), f.boolean("reached"), _number(f, "last", finite=False))
    f.finish()
    return target


def _profile(f: Fields) -> JobProfile:
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


def _calibration(f: Fields) -> Calibration:
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


def _whole_map(f: Fields, name: str) -> dict[int, int]:
    sub = f.sub(name)
    out = {}
    for key in sub.data:
        if not key.isdigit() or int(key) < 1:
            raise sub.fail(key, key, "must be named by a memory size in MB")
        out[int(key)] = sub.integer(key, minimum=0)
    return out


def _texts_map(f: Fields, name: str) -> dict[str, str]:
    sub = f.sub(name)
    return {key: _str(sub, key) for key in sub.data}


def _numbers_map(f: Fields, name: str) -> dict[str, float]:
    sub = f.sub(name)
    return {key: sub.number(key, minimum=0) for key in sub.data}


def _options(f: Fields, name: str) -> dict[str, str | int | float | bool]:
    sub = f.sub(name, {})
    for key, value in sub.data.items():
        if not isinstance(value, str | int | float | bool):
            raise sub.fail(key, value, "must be a plain value (text, number, true/false)")
    return dict(sub.data)


def _constraint(f: Fields) -> Constraint:
    c = f.sub("constraint")
    constraint = Constraint(
        c.optional_number("budget_usd", minimum=0, strict_minimum=True),
        c.optional_number("deadline_s", minimum=0, strict_minimum=True),
        Objective(c.choice("objective", _OBJECTIVES)),
    )
    c.finish()
    return constraint


def _allocation_change(f: Fields) -> AllocationChange:
    return AllocationChange(f.integer("epoch", minimum=1), allocation_from(f))


def _record(f: Fields) -> RunRecord:
    f.raw("schema_version")
    source = f.raw("job_source", None)
    if source is not None and not isinstance(source, str):
        raise f.fail("job_source", source, "must be a path or null")
    record = RunRecord(
        kind=f.choice("kind", KINDS),
        status=f.choice("status", RUN_STATUSES),
        job=_mapping(f, "job"),
        job_source=source,
        constraint=_constraint(f),
        catalog=f.text("catalog", "local"),
        platform=f.text("platform", "local"),
        platform_options=_options(f, "platform_options"),
        trials=_list(f, "trials", _trial),
        charges=_list(f, "charges", _charge),
        elapsed_s=f.number("elapsed_s", minimum=0),
        events=_list(f, "events", _event),
        profile=_profile(f) if f.raw("profile", None) is not None else None,
        profile_cached=_maybe(f, "profile_cached", lambda g, n: g.boolean(n)),
        coordinator_s=f.optional_number("coordinator_s", minimum=0),
        compute_factor=f.optional_number("compute_factor", minimum=0, strict_minimum=True),
        probe_warm=_maybe(f, "probe_warm", _whole_map),
        plan=_maybe(f, "plan", lambda g, n: _plan(g.sub(n))),
        stage=f.integer("stage", 0, minimum=0),
        enforcement=_maybe(f, "enforcement", _texts_map),
        restarts=f.integer("restarts", 0, minimum=0),
        segments=f.integer("segments", 0, minimum=0),
        cold_starts=f.integer("cold_starts", 0, minimum=0),
        timings=_numbers_map(f, "timings") if f.raw("timings", None) is not None else {},
        best=_maybe(f, "best", lambda g, n: _best(g.sub(n))),
        calibration=_calibration(f) if f.raw("calibration", None) else None,
        partition_write_mbps=f.optional_number("partition_write_mbps", minimum=0),
        target=_maybe(f, "target", lambda g, n: _target(g.sub(n))),
        outcome=_maybe(f, "outcome", lambda g, n: g.choice(n, ("target-missed",))),
        allocation=_maybe(f, "allocation", lambda g, n: allocation_from(g.sub(n))),
        allocations=_list(f, "allocations", _allocation_change) if f.has("allocations") else [],
        workflow=_maybe(f, "workflow", lambda g, n: workflow_from(g.sub(n))),
        waiting_s=f.number("waiting_s", 0.0, minimum=0),
        stop_reason=_maybe(f, "stop_reason", _str),
    )
    f.finish()
    return record


def _check_together(r: RunRecord) -> None:
    """What the fields say of each other: a train record is not a tune record's, the best
    trial is one the record holds and did not fail, options fit the platform."""
    ids = [t.trial_id for t in r.trials]
    if len(set(ids)) != len(ids):
        raise RecordError(f"record.trials name a trial twice: {ids}")
    if r.kind == "train" and r.workflow is None and len(r.trials) > 1:
        raise RecordError(
            f"the value of record.kind is 'train', but the record holds {len(r.trials)} trials "
            "(a training run trains one): a tune run's record?"
        )
    if r.kind == "tune" and (r.workflow is not None or r.target is not None):
        extra = "workflow" if r.workflow is not None else "target"
        raise RecordError(
            f"the value of record.kind is 'tune', but the record holds a training run's {extra}"
        )
    if r.platform == "local" and "address" in r.platform_options:
        raise RecordError(
            f"record.platform_options.address is {shown(r.platform_options['address'])}, but "
            "record.platform is 'local' (an address names a cluster)"
        )
    if r.best is not None:
        named = next((t for t in r.trials if t.trial_id == r.best.trial), None)
        if named is None:
            raise RecordError(f"record.best names trial {r.best.trial}, which the record lacks")
        if named.status in ("failed", "diverged"):
            raise RecordError(
                f"record.best names trial {r.best.trial}, but that trial {named.status}"
            )
    if r.plan is not None and r.stage > len(r.plan.stages):
        raise RecordError(
            f"the value of record.stage is {r.stage}, but the plan has {len(r.plan.stages)} stages"
        )


def phase_goal_from(f: Fields) -> SearchGoal:
    goal = SearchGoal(
        Objective(f.choice("objective", _OBJECTIVES)),
        f.number("epochs", minimum=0),
        f.optional_number("limit", minimum=0),
    )
    f.finish()
    return goal


def probe_from(f: Fields) -> ProbeRecord:
    failed = _maybe(f, "failed", _str)
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
    )
    f.finish()
    return probe


def chunk_from(f: Fields) -> Chunk:
    chunk = Chunk(f.text("file"), f.integer("samples", minimum=0), _str(f, "change"))
    f.finish()
    return chunk


def rejected_from(f: Fields) -> Rejected:
    rejected = Rejected(f.text("file"), _str(f, "reason"))
    f.finish()
    return rejected


def phase_from(f: Fields) -> PhaseRecord:
    phase = PhaseRecord(
        index=f.integer("index", minimum=1),
        change=_str(f, "change"),
        batch_size=f.integer("batch_size", minimum=1),
        samples=f.integer("samples", minimum=1),
        model=_mapping(f, "model"),
        model_mb=f.number("model_mb", minimum=0),
        params=f.integer("params", minimum=0),
        epochs=f.integer("epochs", minimum=1),
        trial=f.integer("trial", minimum=0),
        t_start_s=f.number("t_start_s", minimum=0),
        goal=phase_goal_from(f.sub("goal")),
        probes=_list(f, "probes", probe_from),
        stop_reason=_maybe(f, "stop_reason", _str),
        searched=f.boolean("searched", False),
        retrigger=f.boolean("retrigger", False),
        choice=_maybe(f, "choice", lambda g, n: allocation_from(g.sub(n))),
        search_usd=f.number("search_usd", 0.0, minimum=0),
        search_s=f.number("search_s", 0.0, minimum=0),
        train_from_usd=f.optional_number("train_from_usd", minimum=0),
        t_end_s=f.optional_number("t_end_s", minimum=0),
        train_usd=f.optional_number("train_usd", minimum=0),
        epochs_run=_list(f, "epochs_run", _epoch_record) if f.has("epochs_run") else [],
    )
    f.finish()
    return phase


def workflow_from(f: Fields) -> WorkflowRecord:
    flow = WorkflowRecord(
        kind=f.text("kind"),
        phases=_list(f, "phases", phase_from),
        current=_maybe(f, "current", lambda g, n: phase_from(g.sub(n))),
        origin_s=f.optional_number("origin_s", minimum=0),
        chunks=_list(f, "chunks", chunk_from) if f.has("chunks") else [],
        rejected=_list(f, "rejected", rejected_from) if f.has("rejected") else [],
    )
    f.finish()
    return flow
