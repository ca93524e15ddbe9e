"""A workflow's phases: the stretches of training with one batch size, model and data, in
order (the steps of a batch-size schedule, the models of a NAS sequence, or data chunks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faasml.job.workflow import WorkflowSpec


@dataclass(frozen=True)
class Phase:
    """A stretch of training with one batch size, model and data."""

    index: int
    trial: int
    first_epoch: int
    """The trial's epochs done when the phase starts."""
    epochs: int
    batch_size: int
    model: dict[str, Any]
    samples: int
    """Training samples the phase trains on (online: every chunk landed so far)."""
    arrival_s: float = 0.0
    change: str = ""
    """What changed from the phase before ('' for the first, and where nothing did)."""


def workflow_phases(
    spec: WorkflowSpec, job_batch: int, model: dict[str, Any], samples: int, max_epochs: int
) -> list[Phase]:
    """The phases of a workflow, in order."""
    phases: list[Phase] = []
    if spec.kind == "dynamic-batching":
        steps = list(spec.batch_size_schedule)
        if steps[0][0] > 0:
            steps.insert(0, (0, job_batch))
        for i, (epoch, size) in enumerate(steps):
            end = steps[i + 1][0] if i + 1 < len(steps) else max_epochs
            before = phases[-1].batch_size if phases else size
            change = f"batch size {before} -> {size}" if size != before else ""
            phases.append(Phase(i, 0, epoch, end - epoch, size, model, samples, change=change))
    elif spec.kind == "nas":
        for i, entry in enumerate(spec.models):
            options = {k: v for k, v in entry.items() if k != "name"}
            change = f"model {i + 1} of {len(spec.models)}: {entry['name']} {options}" if i else ""
            phases.append(
                Phase(
                    i, i, 0, spec.epochs_per_model, job_batch, dict(entry), samples, change=change
                )
            )
    elif spec.watch is not None:
        # The job's own data first, then one phase per file landing in the folder; a file's
        # size is known when it lands (until then each is taken to be as large as the job's).
        for i in range(spec.watch.files + 1):
            change = f"chunk file {i} of {spec.watch.files}" if i else ""
            phases.append(
                Phase(
                    i,
                    0,
                    i * spec.epochs_per_chunk,
                    spec.epochs_per_chunk,
                    job_batch,
                    model,
                    samples * (i + 1),
                    change=change,
                )
            )
    else:
        landed, epoch = 0.0, 0
        for i, share in enumerate(spec.chunks):
            landed += share
            count = min(samples, max(1, round(landed * samples)))
            change = f"chunk {i + 1} of {len(spec.chunks)} landed ({count:,} samples)" if i else ""
            phases.append(
                Phase(
                    i,
                    0,
                    epoch,
                    spec.epochs_per_chunk,
                    job_batch,
                    model,
                    count,
                    arrival_s=i * spec.every_s,
                    change=change,
                )
            )
            epoch += spec.epochs_per_chunk
    return phases


def describe(phase: Phase) -> str:
    """The phase in a few words (for a refusal that names it)."""
    return f"batch size {phase.batch_size}, {phase.samples:,} samples, model {phase.model}"
