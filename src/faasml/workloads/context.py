"""``faasml.report(...)``: metrics a model's code reports from inside a worker.

A worker opens a report context for each segment; what ``report`` records there travels back
with the segment's report and lands in the trial's epoch history (``reported``), the run
record and the report. Outside a worker there is nowhere to report to, and ``report`` says so.
"""

from __future__ import annotations

import math
from typing import Any

from faasml.exceptions import FaasmlError

_ACTIVE: dict[str, float] | None = None


def report(**metrics: float) -> None:
    """Record named numeric metrics for the epoch being trained (the last value wins)."""
    if _ACTIVE is None:
        raise FaasmlError(
            "faasml.report() records metrics of a training step run by faasml; call it from "
            "model code that a faasml worker runs (e.g. a Model's loss_and_grad or evaluate)"
        )
    for name, value in metrics.items():
        number = float(value)
        if not math.isfinite(number):
            raise FaasmlError(f"the value of metric {name!r} is {value!r}, but must be finite")
        _ACTIVE[name] = number


def active() -> bool:
    """True inside a worker's training segment (where ``report`` records)."""
    return _ACTIVE is not None


def open_context() -> None:
    global _ACTIVE
    _ACTIVE = {}


def close_context() -> dict[str, Any]:
    global _ACTIVE
    collected, _ACTIVE = _ACTIVE or {}, None
    return collected
