"""Wall time of a real run: seconds since its clock started (after warm-up and calibration)."""

from __future__ import annotations

import time


class WallTime:
    """Seconds since :meth:`start` (since construction until then)."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def start(self) -> None:
        self._origin = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self._origin
