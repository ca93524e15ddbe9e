"""How many serving slots each inference service gets, and where a request goes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faasml.cluster.forecast import predict, seasonal_peak
from faasml.cluster.inference import InferenceService
from faasml.cluster.ray_run.config import RunConfig


class InferenceSizer:
    """The rate the run provisions each service for in the coming round, under
    ``config.forecast`` (:mod:`faasml.cluster.forecast`, as the simulator's
    ``provision_rate``): ``exact`` reads the coming round's true peak, ``seasonal`` the
    same round's a day earlier (``seasonal-last``: or the last round's, if larger; both
    fall back to ``max``); ``last`` and ``max`` see only the peaks observed between the
    run's own earlier round starts (rounds slip when the driver is busy, so they are not
    ``round_s`` apart: a real manager observes the rounds it had). Times are wall seconds
    since the run began; ``scale`` trace seconds per wall second. No I/O: call
    :meth:`rates` once at the start of every round."""

    def __init__(
        self, services: Sequence[InferenceService], config: RunConfig, scale: float
    ) -> None:
        self.services = list(services)
        self.cfg = config
        self.scale = scale
        self.history: list[list[float]] = [[] for _ in self.services]
        """Each service's observed peak rate of every round so far, oldest first."""
        self._last: float | None = None

    def rates(self, now: float) -> list[float]:
        """Record the round that ended at ``now`` and return each service's rate to
        provision for ``[now, now + round_s)`` (in the trace's requests per second)."""
        cfg, t = self.cfg, now * self.scale
        if self._last is not None and t > self._last:
            for service, seen in zip(self.services, self.history, strict=True):
                seen.append(service.rate.peak_between(self._last, t))
                del seen[: -cfg.forecast_window]  # no forecast looks further back
        self._last = t
        window = cfg.round_s * self.scale
        if cfg.forecast == "exact":
            return [cfg.headroom * s.rate.peak_between(t, t + window) for s in self.services]
        if cfg.forecast.startswith("seasonal"):  # the trace a day ago (the trace's clock)
            past = [seasonal_peak(s.rate, t, window) for s in self.services]
            if cfg.forecast == "seasonal-last":
                past = [
                    None if p is None else max([p, *seen[-1:]])
                    for p, seen in zip(past, self.history, strict=True)
                ]
            return [
                cfg.headroom * p
                if p is not None
                else predict("max", seen, cfg.forecast_window, cfg.headroom)
                for p, seen in zip(past, self.history, strict=True)
            ]
        return [
            predict(cfg.forecast, seen, cfg.forecast_window, cfg.headroom) for seen in self.history
        ]


def route(slots: Sequence[tuple[int, Any, float]], at: float, n: int) -> tuple[Any, float | None]:
    """Where a request sent at ``at`` goes among its service's ``slots`` (server, actor,
    serving from): round-robin (the ``n``-th request) over the slots serving by ``at``;
    if none serves yet, ``(None, t)``: hold it until ``t``, when the first starting one
    does; with no slot at all, ``(None, None)``: nothing serves it (an SLO miss)."""
    ready = [actor for _, actor, since in slots if since <= at]
    if ready:
        return ready[n % len(ready)], None
    if slots:
        return None, min(since for _, _, since in slots)
    return None, None
