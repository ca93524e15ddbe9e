"""The coordinator's billing: every invocation (failed ones too), the store requests a
segment's workers made, standalone bills (prewarmed functions) and time-priced services
(servers billed per second while the run holds them)."""

from __future__ import annotations

import contextlib

from faasml.catalog import StorageService
from faasml.runtime.coordinator.state import CoordinatorBase, Segment
from faasml.runtime.platform import FunctionError, Invocation
from faasml.runtime.trial import TrialState
from faasml.runtime.worker import SegmentReport


class SegmentBilling(CoordinatorBase):
    """Bills what the coordinator's segments use, with the catalog's prices."""

    def spent_usd(self) -> float:
        """Billed so far, plus what time-priced services and caches in use have run up (billed
        at close)."""
        caches = 0.0
        if self._caches:
            from faasml.sync.stores.infinicache.runs import bill_usd

            caches = sum(bill_usd(c.bill(), self.meter.platform) for c in self._caches.values())
        return (
            self.meter.total_usd
            + caches
            + sum(
                (self.now() - since) / 3600.0 * service.hourly_usd
                for service, since in self._time_priced()
            )
        )

    def _time_priced(self) -> list[tuple[StorageService, float]]:
        services = ((self.catalog.storages.get(name), t) for name, t in self._in_use_since.items())
        return [(s, t) for s, t in services if s is not None and s.pricing == "time"]

    def _collect_standalone(self) -> None:
        for billed in self.platform.take_standalone_bills():
            self.meter.standalone(billed, self.now())

    def _bill(self, invocation: Invocation, trial: TrialState) -> None:
        # The platform sets the bill when the invocation ends; wait for that.
        with contextlib.suppress(FunctionError, TimeoutError):
            invocation.result(timeout=60)
        billed = invocation.billed
        if billed is not None:
            self.meter.invocation(billed, self.now(), trial.trial_id)
            self.estimator.observe_billed(billed)

    def _bill_requests(self, segment: Segment, reports: list[SegmentReport]) -> None:
        data_service = self.catalog.storage(self.catalog.platform.data_store)
        sync_service = self.catalog.storages.get(segment.allocation.storage, data_service)
        for report in reports:
            self.meter.requests(
                data_service, report.object_stats, self.now(), segment.trial.trial_id
            )
            self.meter.requests(sync_service, report.sync_stats, self.now(), segment.trial.trial_id)

    def _bill_servers(self) -> None:
        """Bill the time-priced services used (per second, from first use: a node the run
        needed is paid while the run holds it)."""
        now = self.now()
        for service, since in self._time_priced():
            self.meter.server(service, now - since, now)
        self._in_use_since.clear()
