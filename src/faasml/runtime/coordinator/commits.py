"""The coordinator's results: a finished segment's reports committed to its trial (new
checkpoint, position, partial sums, an epoch's record in the trial's history) and its
measured round time fed back to the estimator; the run record written after them."""

from __future__ import annotations

from collections.abc import Callable

from faasml.catalog import Catalog
from faasml.runtime.coordinator.estimates import SegmentEstimator
from faasml.runtime.coordinator.failures import FailurePolicy
from faasml.runtime.coordinator.ranking import divergence
from faasml.runtime.coordinator.state import CoordinatorState, Segment
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.function.worker import SegmentReport
from faasml.sync.stores import Store


class Committer:
    """Commits finished segments to their trials and has the run record written."""

    def __init__(
        self,
        catalog: Catalog,
        objects: Store,
        estimator: SegmentEstimator,
        failures: FailurePolicy,
        spent_usd: Callable[[], float],
        state: CoordinatorState,
        on_segment: Callable[[TrialState, Segment | None], None] | None = None,
    ) -> None:
        """``failures`` cleans up a finished segment's keys (and stops the run when its store
        is lost); ``spent_usd`` is what the run has spent, for each epoch's record;
        ``on_segment`` writes the run record."""
        self._catalog = catalog
        self._objects = objects
        self._estimator = estimator
        self._failures = failures
        self._spent_usd = spent_usd
        self._state = state
        self._on_segment = on_segment
        self._unrecorded: list[tuple[TrialState, Segment, str | None]] = []
        """Segments committed to their trials that the run record does not name yet: (trial,
        segment, the checkpoint it replaced, deleted once the record is written)."""
        self._replaced: list[str] = []
        """Checkpoints replaced by recorded segments, deleted at the record's next durable
        write (``release_replaced``)."""
        self.commits_s: list[float] = []
        """The coordinator's own seconds committing each finished segment (the record's write
        comes after the next launch, not in it)."""

    def commit(self, segment: Segment, reports: list[SegmentReport]) -> None:
        """Commit a finished segment's reports to its trial (recorded at the next ``record``)."""
        trial = segment.trial
        lead = reports[0]
        elapsed = self._state.clock.monotonic() - segment.started
        if lead.rounds:
            busy = max(r.compute_s + r.sync_s for r in reports) / lead.rounds
            overhead, epoch_end = self._overhead(segment, busy), None
            if lead.epochs:  # each epoch's end inside the segment: not the segment's fixed time
                ends = [e["elapsed_s"] - e["compute_s"] - e["sync_s"] for e in lead.epochs]
                epoch_end = max(sum(ends) / len(ends), 0.0)
                overhead -= (len(ends) - 1) * epoch_end
            self._estimator.observe_round(segment.allocation, busy, overhead, epoch_end)
        previous = trial.checkpoint
        trial.checkpoint = lead.checkpoint
        trial.round_id += lead.rounds
        if lead.epochs:
            self._commit_epochs(segment, reports, elapsed)
        else:
            self._add_partial(
                trial,
                segment,
                [(r.loss_sum, r.samples, r.compute_s, r.sync_s, r.load_s) for r in reports],
                elapsed,
                invocations=1,
            )
            if lead.epoch_done:
                reported = [r.reported for r in reports]
                self._close_epoch(trial, segment, lead.val, reported, lead.batch_size)
            else:
                trial.batch = segment.stop_batch or 0
        lost = self._failures.cleanup(segment)
        if lost is not None:  # the segment is done, but the next one cannot be
            self._failures.store_lost(segment, lost)
        self._unrecorded.append((trial, segment, previous))
        self.commits_s.append(self._state.clock.monotonic() - (segment.started + elapsed))

    def record(self) -> None:
        """Write the run record (``on_segment``) for the segments committed since the last
        one; the checkpoints they replaced are deleted once a record naming their successors
        is durable (``release_replaced``), so that a run killed or a machine crashed before
        that resumes from the old ones. The run loop calls it after launching the next
        segments: functions do not wait for the record's write."""
        if not self._unrecorded:
            return
        pending, self._unrecorded = self._unrecorded, []
        began = self._state.clock.monotonic()
        timings = self._state.timings
        if self._on_segment is not None:
            trial, segment, _ = pending[-1]
            self._on_segment(trial, segment)
            timings["record_s"] += self._state.clock.monotonic() - began
        for trial, _, previous in pending:
            if previous is not None and previous != trial.checkpoint:
                self._replaced.append(previous)
        if self._on_segment is None:  # no record to wait for
            self.release_replaced()
        timings["commit_s"] += self._state.clock.monotonic() - began

    def release_replaced(self) -> None:
        """Delete the checkpoints replaced by segments the run's record names (the run calls
        it after each durable write of its record): the record after a segment is written
        without an fsync, and a crash of the machine, which loses what was not synced, must
        still find every checkpoint the record on disk names."""
        replaced, self._replaced = self._replaced, []
        for key in replaced:
            self._objects.delete(key)

    def _commit_epochs(
        self, segment: Segment, reports: list[SegmentReport], elapsed: float
    ) -> None:
        """A segment of several epochs: each becomes its own record in the trial's history,
        as one-epoch segments would have made it; the first also holds the segment's start
        (invocation, loading) and end (checkpoint), the wall time outside the epochs."""
        trial, lead = segment.trial, reports[0]
        spans = [max(r.epochs[i]["elapsed_s"] for r in reports) for i in range(len(lead.epochs))]
        outside = max(elapsed - sum(spans), 0.0)
        for i, span in enumerate(spans):
            parts = [
                (
                    r.epochs[i]["loss_sum"],
                    r.epochs[i]["samples"],
                    r.epochs[i]["compute_s"],
                    r.epochs[i]["sync_s"],
                    r.load_s if i == 0 else 0.0,
                )
                for r in reports
            ]
            seconds = span + (outside if i == 0 else 0.0)
            share = seconds / max(elapsed, 1e-12)
            self._add_partial(trial, segment, parts, seconds, 1 if i == 0 else 0, share)
            reported = [r.epochs[i]["reported"] for r in reports]
            self._close_epoch(trial, segment, lead.epochs[i]["val"], reported, lead.batch_size)

    def _add_partial(
        self,
        trial: TrialState,
        segment: Segment,
        parts: list[tuple[float | None, float, float, float, float]],
        seconds: float,
        invocations: int,
        share: float = 1.0,
    ) -> None:
        """Add each worker's (loss sum, samples, compute s, sync s, load s), ``seconds`` of
        the segment's wall time and ``share`` of its vCPU demand to the epoch in progress (a
        loss sum of None: the epoch's training loss is not known)."""
        partial = trial.partial
        added = {
            "loss_sum": sum(p[0] for p in parts if p[0] is not None),
            "loss_unknown": float(any(p[0] is None for p in parts)),
            "samples": sum(p[1] for p in parts),
            "seconds": seconds,
            "demand_vcpu_s": segment.demand_vcpu_s * share,
            "compute_s": max(p[2] for p in parts),
            "sync_s": max(p[3] for p in parts),
            "load_s": max(p[4] for p in parts),
            "invocations": invocations,
        }
        for key, value in added.items():
            partial[key] = partial.get(key, 0.0) + value

    def _close_epoch(
        self,
        trial: TrialState,
        segment: Segment,
        val: dict[str, float],
        reported: list[dict[str, float]],
        batch_size: int,
    ) -> None:
        """The epoch in progress ends: its record joins the trial's history (``reported``:
        each worker's metrics, the last worker's winning)."""
        samples = trial.partial["samples"]
        seconds = trial.partial["seconds"]
        trial.history.append(
            {
                "epoch": trial.epoch + 1,
                "loss": None
                if trial.partial.get("loss_unknown")
                else trial.partial["loss_sum"] / max(samples, 1.0),
                "val_loss": val.get("loss"),
                "val_accuracy": val.get("accuracy"),
                "epoch_s": seconds,
                "compute_s": trial.partial["compute_s"],
                "sync_s": trial.partial["sync_s"],
                "load_s": trial.partial["load_s"],
                "samples_per_s": samples / seconds if seconds > 0 else 0.0,
                "batch_size": batch_size,
                "reported": {k: v for r in reported for k, v in r.items()},
                "invocations": int(trial.partial["invocations"]),
                "vcpu_demand": trial.partial["demand_vcpu_s"] / seconds if seconds else 0.0,
                "n": segment.allocation.n,
                "memory_mb": segment.allocation.memory_mb,
                "scheme": segment.allocation.scheme,
                "t_s": self._state.now(),
                "spent_usd": self._spent_usd(),
            }
        )
        trial.partial = {}
        trial.epochs_done += 1
        trial.epoch += 1
        trial.batch = 0
        stop = self._state.options.stop_diverged and trial.diverged_epoch is None
        if stop and divergence(trial.history[-1]) is not None:  # launched no more
            trial.status, trial.diverged_epoch = "diverged", trial.epoch

    def _overhead(self, segment: Segment, per_round: float) -> float:
        """Billed seconds of the segment's longest function outside its rounds and start."""
        billed_init = self._catalog.platform.bills_cold_start
        spans = [
            b.duration_s - (b.init_s if b.cold and billed_init else 0.0)
            for b in (i.billed for i in segment.invocations)
            if b is not None
        ]
        return max(spans, default=0.0) - per_round * segment.rounds
