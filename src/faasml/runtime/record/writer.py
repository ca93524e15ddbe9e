"""How a run writes its record: with the counts of the coordinator running it added to those
the record had (a resumed run's), whole after every segment but made durable (fsync) only
where the last durable write is old enough, and always on request.

A checkpoint a segment replaced is deleted only after a durable write, so the record on disk
never names a deleted one.
"""

from __future__ import annotations

import time

from faasml.runtime.coordinator import Coordinator
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir


class RecordWriter:
    """Writes one run's record into its directory (``run_base.BaseRun.save``)."""

    def __init__(self, run_dir: RunDir) -> None:
        self.dir = run_dir
        self.lazy = False
        """Write durably only where the last durable write is old enough (after a segment)."""
        self._counted: tuple[Coordinator, dict[str, int]] | None = None
        self._timings_base: dict[str, float] = {}
        """``timings`` of the record before this process continued it (a resumed run)."""
        self._synced = 0.0
        """When the record was last made durable (monotonic)."""

    def follow(self, coordinator: Coordinator, record: RunRecord) -> None:
        """Count ``coordinator``'s restarts, segments, cold starts and timings on top of
        ``record``'s own from now on."""
        r = record
        counts = {"restarts": r.restarts, "segments": r.segments, "cold_starts": r.cold_starts}
        self._counted = (coordinator, counts)
        self._timings_base = dict(r.timings)

    def unfollow(self) -> None:
        """The coordinator is closed: the record keeps the counts it has."""
        self._counted = None

    def count(self, record: RunRecord) -> None:
        """The counts so far into ``record``, so a killed run's record keeps them."""
        if self._counted is None:
            return
        coordinator, base = self._counted
        record.restarts = base["restarts"] + coordinator.restarts
        record.segments = base["segments"] + coordinator.segments
        record.cold_starts = base["cold_starts"] + coordinator.platform.cold_starts
        previous = self._timings_base
        record.timings = {
            key: previous.get(key, 0.0) + value for key, value in coordinator.timings.items()
        }

    def write(self, record: RunRecord, durable_every_s: float) -> None:
        """Write ``record`` atomically; durably unless ``lazy`` and the last durable write is
        less than ``durable_every_s`` old."""
        now = time.monotonic()
        durable = not self.lazy or now - self._synced >= durable_every_s
        self.dir.write_record(record, durable=durable)
        if durable:
            self._synced = now
            if self._counted is not None:  # the record on disk names their successors now
                self._counted[0].release_replaced()
