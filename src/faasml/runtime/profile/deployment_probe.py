"""A deployment search's probe on the real platform: a few billed rounds of the job on one
allocation, from the trial's current checkpoint (SMLT §3.2, "profiling the throughput").

The probe trains a throwaway copy of the trial (its checkpoint copied, so the model is the one
being trained and the trial's own checkpoint is never touched) for ``rounds`` rounds through
the coordinator — the same workers, stores and billing as the run — and its charges are
relabelled ``search`` so the bill shows what choosing the deployment cost.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from faasml.runtime.coordinator import BudgetExhaustedError, Coordinator
from faasml.runtime.coordinator.meter import Charge
from faasml.runtime.coordinator.trial import TrialState
from faasml.types import Allocation
from faasml.workloads.global_batch import rounds_per_epoch

PROBE_TRIAL_BASE = 100_000
"""Probe trials are numbered from here (apart from the run's trials in the bill)."""


@dataclass(frozen=True)
class ProbeResult:
    """What a probe measured: seconds per round (computation and synchronisation of the
    slowest worker), the data load, its wall time and bill; ``failed`` says why it could not."""

    round_s: float
    load_s: float
    rounds: int
    wall_s: float
    usd: float
    failed: str | None = None


def probe_allocation(
    coordinator: Coordinator,
    trial: TrialState,
    allocation: Allocation,
    rounds: int,
    number: int,
) -> ProbeResult:
    """Run ``rounds`` rounds of ``trial`` on ``allocation`` as probe ``number``; billed."""
    meter = coordinator.meter
    first_charge = len(meter.charges)
    began = time.monotonic()
    copy_key = None
    if trial.checkpoint is not None:
        data = coordinator.objects.get(trial.checkpoint)
        if data is not None:
            copy_key = f"{coordinator.namespace}/probe/{number}/from"
            coordinator.objects.put(copy_key, data)
    probe = TrialState(
        PROBE_TRIAL_BASE + number,
        dict(trial.config),
        epoch=trial.epoch,
        round_id=trial.round_id,
        checkpoint=copy_key,
        status="running",
    )
    failed: str | None = None
    try:
        if not coordinator.run_segment(probe, allocation, rounds):
            failed = probe.failures[-1] if probe.failures else "the platform refused it"
        elif probe.failures:
            failed = probe.failures[-1]
    except BudgetExhaustedError as err:
        failed = str(err)
    finally:
        _relabel(meter.charges, first_charge, allocation)
        for key in (probe.checkpoint, copy_key):
            if key is not None:
                coordinator.objects.delete(key)
    usd = sum(c.usd for c in meter.charges[first_charge:])
    wall = time.monotonic() - began
    if failed is not None:
        return ProbeResult(0.0, 0.0, 0, wall, usd, failed)
    if probe.history:  # the probe covered the whole epoch
        record = probe.history[-1]
        ran = rounds_per_epoch(coordinator.samples, _batch(coordinator, trial))
        busy, load = record["compute_s"] + record["sync_s"], record["load_s"]
    else:
        ran = max(probe.batch, 1)
        busy = probe.partial.get("compute_s", 0.0) + probe.partial.get("sync_s", 0.0)
        load = probe.partial.get("load_s", 0.0)
    return ProbeResult(busy / max(ran, 1), load, ran, wall, usd)


def _batch(coordinator: Coordinator, trial: TrialState) -> int:
    return coordinator.recipe_of(trial).batch_size


def _relabel(charges: list[Charge], start: int, allocation: Allocation) -> None:
    """The probe's charges, from ``start``, as 'search' (what the search cost). The meter's
    list is changed in place: nothing else bills while a probe runs (the coordinator runs
    one thing at a time between phases)."""
    for index in range(start, len(charges)):
        charge = charges[index]
        charges[index] = dataclasses.replace(
            charge, kind="search", detail=f"probe {allocation}: {charge.kind} {charge.detail}"
        )
