"""The run record in and out of JSON, in one place: ``record_to_json`` writes the current
``SCHEMA_VERSION``; ``record_from_json`` migrates an older record (those written before the
field, version 0, have the same shape) and validates every field, and the fields against each
other (its parts read by ``record_read``), raising one ``RecordError`` line that names the
first wrong one."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from faasml._validate import Fields, shown
from faasml.exceptions import ConfigError, RecordError
from faasml.runtime.record.fields import (
    allocation_change_from,
    allocation_from,
    best_from,
    calibration_from,
    charge_from,
    constraint_from,
    counts_by_memory,
    event_from,
    list_of,
    mapping_of,
    maybe,
    numbers_of,
    options_of,
    plan_from,
    profile_from,
    target_from,
    text_of,
    texts_of,
    trial_from,
    workflow_from,
)
from faasml.runtime.record.records import (
    KINDS,
    OMIT_AT_DEFAULT,
    RUN_STATUSES,
    Best,
    Estimate,
    PhaseRecord,
    PlanRecord,
    ProbeRecord,
    RunRecord,
    StageRecord,
    TrialRecord,
    WorkflowRecord,
)
from faasml.types import Constraint

SCHEMA_VERSION = 1
"""1: the record names its version (version 0, before the field, has the same shape)."""


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
    _estimate_json(out, "predicted", stage.predicted)
    _estimate_json(out, "replanned", stage.replanned)
    _estimate_json(out, "repredicted", stage.repredicted)
    _estimate_json(out, "measured", stage.measured)
    optional = {
        "measured_between_s": stage.measured_between_s,
        "prewarm_usd": stage.prewarm_usd,
        "trial_factors": None if stage.trial_factors is None else list(stage.trial_factors),
        "batch_size": stage.batch_size,
        "samples": stage.samples,
        "model": stage.model,
        "planned_allocation": None
        if stage.planned_allocation is None
        else dataclasses.asdict(stage.planned_allocation),
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
    _estimate_json(out, "predicted", plan.predicted)
    if plan.workload is not None:
        out["workload"] = plan.workload
    if plan.between_stages_s is not None:
        out["between_stages_s"] = plan.between_stages_s
    if plan.replans:
        out["replans"] = plan.replans
    if plan.repredictions:
        out["repredictions"] = [dataclasses.asdict(r) for r in plan.repredictions]
    return out


def trial_json(trial: TrialRecord) -> dict[str, Any]:
    """Every field of the trial in its order, lists for tuples (the history's epoch records
    as they are), but a field marked ``OMIT_AT_DEFAULT`` where it holds its default."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(trial):
        value = getattr(trial, field.name)
        if dict(field.metadata) == OMIT_AT_DEFAULT and value == field.default:
            continue
        out[field.name] = list(value) if isinstance(value, tuple) else _copied(value)
    return out


def _copied(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


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
        "probes": [_probe_json(p) for p in phase.probes],
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
        "trials": [trial_json(t) for t in r.trials],
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
        "job_file_sha256": r.job_file_sha256,
        "job_signature": r.job_signature,
    }
    out.update({key: value for key, value in optional.items() if value is not None})
    return out


def _best_json(best: Best) -> dict[str, Any]:
    out = dataclasses.asdict(best)
    for name in ("epochs", "mode", "value"):
        if out[name] is None:
            del out[name]
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


def _record(f: Fields) -> RunRecord:
    f.raw("schema_version")
    source = f.raw("job_source", None)
    if source is not None and not isinstance(source, str):
        raise f.fail("job_source", source, "must be a path or null")
    record = RunRecord(
        kind=f.choice("kind", KINDS),
        status=f.choice("status", RUN_STATUSES),
        job=mapping_of(f, "job"),
        job_source=source,
        constraint=constraint_from(f),
        catalog=f.text("catalog", "local"),
        platform=f.text("platform", "local"),
        platform_options=options_of(f, "platform_options"),
        trials=list_of(f, "trials", trial_from),
        charges=list_of(f, "charges", charge_from),
        elapsed_s=f.number("elapsed_s", minimum=0),
        events=list_of(f, "events", event_from),
        profile=profile_from(f) if f.raw("profile", None) is not None else None,
        profile_cached=maybe(f, "profile_cached", lambda g, n: g.boolean(n)),
        coordinator_s=f.optional_number("coordinator_s", minimum=0),
        compute_factor=f.optional_number("compute_factor", minimum=0),
        probe_warm=maybe(f, "probe_warm", counts_by_memory),
        plan=maybe(f, "plan", lambda g, n: plan_from(g.sub(n))),
        stage=f.integer("stage", 0, minimum=0),
        enforcement=maybe(f, "enforcement", texts_of),
        restarts=f.integer("restarts", 0, minimum=0),
        segments=f.integer("segments", 0, minimum=0),
        cold_starts=f.integer("cold_starts", 0, minimum=0),
        timings=numbers_of(f, "timings") if f.raw("timings", None) is not None else {},
        best=maybe(f, "best", lambda g, n: best_from(g.sub(n))),
        calibration=calibration_from(f) if f.raw("calibration", None) else None,
        partition_write_mbps=f.optional_number("partition_write_mbps", minimum=0),
        target=maybe(f, "target", lambda g, n: target_from(g.sub(n))),
        outcome=maybe(f, "outcome", lambda g, n: g.choice(n, ("target-missed",))),
        allocation=maybe(f, "allocation", lambda g, n: allocation_from(g.sub(n))),
        allocations=list_of(f, "allocations", allocation_change_from)
        if f.has("allocations")
        else [],
        workflow=maybe(f, "workflow", lambda g, n: workflow_from(g.sub(n))),
        waiting_s=f.number("waiting_s", 0.0, minimum=0),
        stop_reason=maybe(f, "stop_reason", text_of),
        job_file_sha256=maybe(f, "job_file_sha256", text_of),
        job_signature=maybe(f, "job_signature", text_of),
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


def _probe_json(probe: ProbeRecord) -> dict[str, Any]:
    """A probe as JSON; ``rounds`` only where the search shortened it (records before it read
    the same)."""
    out = {**dataclasses.asdict(probe), "allocation": dataclasses.asdict(probe.allocation)}
    if probe.rounds is None:
        del out["rounds"]
    return out
