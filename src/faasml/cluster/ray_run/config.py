"""The settings of a real run on Ray (``faasml cluster run``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from faasml.cluster.forecast import check_forecast
from faasml.cluster.inference import InferenceService, RateTrace
from faasml.cluster.plain import Job
from faasml.exceptions import ConfigError

DAY_S = 86400.0


@dataclass(frozen=True)
class RunConfig:
    """Settings of a real run."""

    round_s: float = 2.0
    steps: int = 60
    """Optimiser steps of every job (its work)."""
    steps_per_round: int | None = None
    """At most this many steps of a job per round (None: as many as it can do). A cap
    makes a job last at least ``steps / steps_per_round`` rounds whatever the machine's
    speed, so the rounds at which loans and reclaims happen find it running."""
    batch: int = 64
    day_s: float = 60.0
    """Wall seconds a day of the services' rate traces is compressed into."""
    rate_scale: float = 0.05
    """Real requests per second sent for each request per second of the traces."""
    max_time_s: float = 600.0
    loaning: str = "fapes"
    seed: int = 0
    forecast: str = "exact"
    """How the services are sized each round (as ``SimConfig.forecast``): ``exact`` (the
    coming round's true load, a bound), ``last`` or ``max`` (over ``forecast_window``
    rounds observed), times ``headroom``; see :class:`InferenceSizer`."""
    forecast_window: int = 5
    headroom: float = 1.0
    inference_start_s: float = 0.0
    """Wall seconds a serving slot newly given to a service takes before it serves (the
    slots are warm: the run holds requests off it that long, standing for a worker's
    start); 0: at once."""

    def __post_init__(self) -> None:
        for name in ("round_s", "day_s", "max_time_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"the value of {name} is {getattr(self, name)}, but must be > 0")
        if self.steps_per_round is not None and self.steps_per_round < 1:
            raise ConfigError(
                f"the value of steps_per_round is {self.steps_per_round}, but must be >= 1"
            )
        for name in ("steps", "batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"the value of {name} is {getattr(self, name)}, but must be >= 1")
        if not 0 <= self.rate_scale <= 10:
            raise ConfigError(f"the value of rate_scale is {self.rate_scale}, but must be 0-10")
        check_forecast(self.forecast, self.forecast_window, self.headroom)
        if not 0 <= self.inference_start_s <= self.round_s:
            raise ConfigError(
                f"the value of inference_start_s is {self.inference_start_s}, but must be "
                f"from 0 to the round ({self.round_s:g} s)"
            )


def compress_arrivals(jobs: Sequence[Job], day_s: float) -> list[Job]:
    """The jobs as the run starts them: arrivals counted from the first job's and compressed
    like the services' day (a trace day into ``day_s`` wall seconds)."""
    if not jobs:
        return []
    scale = DAY_S / day_s
    first = min(j.arrival_s for j in jobs)
    return [replace(j, arrival_s=(j.arrival_s - first) / scale) for j in jobs]


def compress_service(service: InferenceService, day_s: float) -> InferenceService:
    """A service on the run's clock: its rate trace's times compressed (a day into
    ``day_s`` seconds), its rates kept in the trace's units, as the run sizes it (the
    requests it really sends are ``rate_scale`` times these, which leaves the share of
    requests within the SLO unchanged)."""
    scale = DAY_S / day_s
    rate = RateTrace(service.rate.times_s / scale, service.rate.rates)
    return replace(service, rate=rate)
