"""The coordinator's results: a finished segment's reports committed to its trial (new
checkpoint, position, partial sums, an epoch's record in the trial's history) and its
measured round time fed back to the estimator."""

from __future__ import annotations

import time

from faasml.runtime.coordinator_base import Segment
from faasml.runtime.failures import FailureHandling
from faasml.runtime.worker import SegmentReport


class ResultCommits(FailureHandling):
    """Commits finished segments to their trials."""

    def _commit(self, segment: Segment, reports: list[SegmentReport]) -> None:
        trial = segment.trial
        lead = reports[0]
        elapsed = time.monotonic() - segment.started
        if lead.rounds:
            busy = max(r.compute_s + r.sync_s for r in reports) / lead.rounds
            self.estimator.observe_round(segment.allocation, busy, self._overhead(segment, busy))
        previous = trial.checkpoint
        trial.checkpoint = lead.checkpoint
        trial.round_id += lead.rounds
        trial.partial["loss_sum"] = trial.partial.get("loss_sum", 0.0) + sum(
            r.loss_sum for r in reports
        )
        trial.partial["samples"] = trial.partial.get("samples", 0.0) + sum(
            r.samples for r in reports
        )
        trial.partial["seconds"] = trial.partial.get("seconds", 0.0) + elapsed
        trial.partial["demand_vcpu_s"] = (
            trial.partial.get("demand_vcpu_s", 0.0) + segment.demand_vcpu_s
        )
        trial.partial["compute_s"] = trial.partial.get("compute_s", 0.0) + max(
            r.compute_s for r in reports
        )
        trial.partial["sync_s"] = trial.partial.get("sync_s", 0.0) + max(r.sync_s for r in reports)
        trial.partial["load_s"] = trial.partial.get("load_s", 0.0) + max(r.load_s for r in reports)
        trial.partial["invocations"] = trial.partial.get("invocations", 0.0) + 1
        if lead.epoch_done:
            samples = trial.partial["samples"]
            seconds = trial.partial["seconds"]
            trial.history.append(
                {
                    "epoch": trial.epoch + 1,
                    "loss": trial.partial["loss_sum"] / max(samples, 1.0),
                    "val_loss": lead.val.get("loss"),
                    "val_accuracy": lead.val.get("accuracy"),
                    "epoch_s": seconds,
                    "compute_s": trial.partial["compute_s"],
                    "sync_s": trial.partial["sync_s"],
                    "load_s": trial.partial["load_s"],
                    "samples_per_s": samples / seconds if seconds > 0 else 0.0,
                    "batch_size": lead.batch_size,
                    "reported": {k: v for r in reports for k, v in r.reported.items()},
                    "invocations": int(trial.partial["invocations"]),
                    "vcpu_demand": trial.partial["demand_vcpu_s"] / seconds if seconds else 0.0,
                    "n": segment.allocation.n,
                    "memory_mb": segment.allocation.memory_mb,
                    "scheme": segment.allocation.scheme,
                    "t_s": self.now(),
                    "spent_usd": self.spent_usd(),
                }
            )
            trial.partial = {}
            trial.epochs_done += 1
            trial.epoch += 1
            trial.batch = 0
        else:
            trial.batch = segment.stop_batch or 0
        lost = self._cleanup(segment)
        if lost is not None:  # the segment is done, but the next one cannot be
            self._store_lost(segment, lost)
        if self.on_segment is not None:
            self.on_segment(trial, segment)
        # Only now: on_segment records the new checkpoint, and a run killed before that resumes
        # from the previous one.
        if previous is not None and previous != trial.checkpoint:
            self.objects.delete(previous)

    def _overhead(self, segment: Segment, per_round: float) -> float:
        """Billed seconds of the segment's longest function outside its rounds and start."""
        billed_init = self.catalog.platform.bills_cold_start
        spans = [
            b.duration_s - (b.init_s if b.cold and billed_init else 0.0)
            for b in (i.billed for i in segment.invocations)
            if b is not None
        ]
        return max(spans, default=0.0) - per_round * segment.rounds
