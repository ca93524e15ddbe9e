"""A trial's progress (what its run record holds and a resume restores) and injected faults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faasml.runtime.worker import Fault


@dataclass
class TrialState:
    """A trial's progress: what its run record holds and a resume restores."""

    trial_id: int
    config: dict[str, Any]
    epochs_done: int = 0
    epoch: int = 0
    batch: int = 0
    round_id: int = 0
    checkpoint: str | None = None
    status: str = "pending"
    """pending, running, done (reached its epochs), stopped (budget), failed, pruned,
    diverged (a NaN or infinite loss or metric: trained no further, ranked last)."""
    history: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    failures: list[str] = field(default_factory=list)
    partial: dict[str, float] = field(default_factory=dict)
    """Loss sum and samples of the epoch in progress (segments of a renewed epoch)."""
    memory_mb: int = 0
    """Memory the trial was moved to after running out of it (0: the plan's), kept in the
    record so that a resumed run does not start it again where it cannot fit."""
    diverged_epoch: int | None = None
    """The first epoch whose loss or metric was NaN or infinite (status 'diverged')."""
    functions: int = 0
    """Most functions the trial runs on after repeated synchronisation failures moved it to
    fewer (0: the plan's), kept in the record as ``memory_mb`` is."""

    def to_dict(self) -> dict[str, Any]:
        """A copy as plain values (the record's form): what ``asdict`` makes, without its
        deep copy of every epoch's record (they are not changed once in the history)."""
        data = dict(vars(self))
        data["config"] = dict(self.config)
        data["history"] = [dict(h) for h in self.history]
        data["failures"] = list(self.failures)
        data["partial"] = dict(self.partial)
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TrialState:
        return TrialState(**data)

    @property
    def last(self) -> dict[str, Any]:
        return self.history[-1] if self.history else {}


@dataclass(frozen=True)
class TrialFault:
    """Inject ``fault`` into the first attempt of ``trial``'s segment of ``epoch``."""

    trial: int
    epoch: int
    fault: Fault
