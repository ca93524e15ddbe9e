"""A trial's progress (what its run record holds and a resume restores) and injected faults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faasml.runtime.function.worker import Fault


@dataclass
class TrialState:
    """A trial's progress, live and mutable: what its run record holds and a resume restores.

    ``record.TrialRecord`` defines these fields (their meaning, defaults and JSON form) and
    converts both ways (``TrialRecord.of``, ``TrialRecord.state``); the names are restated
    here, as lists where the record holds tuples, because the type checker needs them, and a
    test fails where the two differ."""

    trial_id: int
    config: dict[str, Any]
    epochs_done: int = 0
    epoch: int = 0
    batch: int = 0
    round_id: int = 0
    checkpoint: str | None = None
    status: str = "pending"
    history: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    failures: list[str] = field(default_factory=list)
    partial: dict[str, float] = field(default_factory=dict)
    memory_mb: int = 0
    diverged_epoch: int | None = None
    functions: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A copy as plain values (the record's form): what ``asdict`` makes, without its
        deep copy of every epoch's record (they are not changed once in the history)."""
        return {name: plain_copy(value) for name, value in vars(self).items()}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TrialState:
        return TrialState(**data)

    @property
    def last(self) -> dict[str, Any]:
        return self.history[-1] if self.history else {}


def plain_copy(value: Any) -> Any:
    """A field's value with its own list or mapping (a list's mappings copied one level)."""
    if isinstance(value, list):
        return [dict(x) if isinstance(x, dict) else x for x in value]
    return dict(value) if isinstance(value, dict) else value


@dataclass(frozen=True)
class TrialFault:
    """Inject ``fault`` into the first attempt of ``trial``'s segment of ``epoch``."""

    trial: int
    epoch: int
    fault: Fault
