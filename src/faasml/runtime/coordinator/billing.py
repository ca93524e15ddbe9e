"""The coordinator's billing: every invocation (failed ones too), the store requests a
segment's workers made, standalone bills (prewarmed functions) and time-priced services
(servers billed per second while the run holds them)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from faasml.catalog import Catalog, StorageService
from faasml.runtime.coordinator.estimates import SegmentEstimator
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.coordinator.state import Segment
from faasml.runtime.coordinator.stores import SyncStores
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.function.worker import SegmentReport
from faasml.runtime.platforms.contract import FunctionError, Invocation, Platform


class SegmentBiller:
    """Bills what the coordinator's segments use, with the catalog's prices."""

    def __init__(
        self,
        platform: Platform,
        catalog: Catalog,
        meter: Meter,
        estimator: SegmentEstimator,
        stores: SyncStores,
        now: Callable[[], float],
    ) -> None:
        """``now``: the run's clock, for the time of each charge."""
        self._platform = platform
        self._catalog = catalog
        self._meter = meter
        self._estimator = estimator
        self._stores = stores
        self._now = now
        self._in_use_since: dict[str, float] = {}
        """First use of each storage service, for time-priced ones (billed while in use)."""

    def spent_usd(self) -> float:
        """Billed so far, plus what time-priced services and caches in use have run up (billed
        at close)."""
        caches = 0.0
        bills = self._stores.cache_bills()
        if bills:
            from faasml.sync.stores.infinicache.runs import bill_usd

            caches = sum(bill_usd(bill, self._meter.platform) for bill in bills)
        return (
            self._meter.total_usd
            + caches
            + sum(
                (self._now() - since) / 3600.0 * service.hourly_usd
                for service, since in self._time_priced()
            )
        )

    def in_use(self, storage: str) -> None:
        """A segment uses ``storage``: a time-priced one is billed from its first use."""
        self._in_use_since.setdefault(storage, self._now())

    def _time_priced(self) -> list[tuple[StorageService, float]]:
        storages = self._catalog.storages
        services = ((storages.get(name), t) for name, t in self._in_use_since.items())
        return [(s, t) for s, t in services if s is not None and s.pricing == "time"]

    def collect_standalone(self) -> None:
        """Charge the bills the platform made outside segments (prewarmed functions)."""
        for billed in self._platform.take_standalone_bills():
            self._meter.standalone(billed, self._now())

    def bill(self, invocation: Invocation, trial: TrialState) -> None:
        """Charge ``invocation`` to ``trial`` once it ended (failed or not)."""
        # The platform sets the bill when the invocation ends; wait for that.
        report = None
        with contextlib.suppress(FunctionError, TimeoutError):
            report = invocation.result(timeout=60)
        billed = invocation.billed
        if billed is not None:
            self._meter.invocation(billed, self._now(), trial.trial_id)
            # Its set-up before the first round, where that held no partition's read (priced
            # apart): a loop's (it brings its data) or a function's that held its partition.
            setup = 0.0
            if report is not None and not getattr(report, "cold_load", True):
                setup = float(getattr(report, "load_s", 0.0) or 0.0)
            self._estimator.observe_billed(billed, setup)

    def bill_requests(self, segment: Segment, reports: list[SegmentReport]) -> None:
        """Charge the store requests the segment's workers report."""
        catalog = self._catalog
        data_service = catalog.storage(catalog.platform.data_store)
        sync_service = catalog.storages.get(segment.allocation.storage, data_service)
        trial_id = segment.trial.trial_id
        for report in reports:
            self._meter.requests(data_service, report.object_stats, self._now(), trial_id)
            self._meter.requests(sync_service, report.sync_stats, self._now(), trial_id)

    def close_services(self) -> None:
        """Bill the time-priced services used (per second, from first use: a node the run
        needed is paid while the run holds it), then stop the servers and deployments started
        for the run and bill those."""
        now = self._now()
        for service, since in self._time_priced():
            self._meter.server(service, now - since, now)
        self._in_use_since.clear()
        self._stores.close(self._bill_cache)

    def _bill_cache(self, name: str, bill: dict[str, float]) -> None:
        self._meter.cache(name, bill, self._now())
