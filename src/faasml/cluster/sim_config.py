"""The settings of the cluster driver (``SimConfig``): rounds, restarts, loans, forecasts."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from faasml.cluster.forecast import check_forecast
from faasml.cluster.loans import check_loaning
from faasml.cluster.records import TABLE2_RESTART_S
from faasml.exceptions import ConfigError


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings."""

    round_s: float = 60.0
    restart_s: float = TABLE2_RESTART_S
    seed: int = 0
    noise: float = 0.0
    """Std-dev of a log-normal factor on each job's true goodput per round (model error)."""
    max_time_s: float | None = None
    """Stop at this time; unfinished jobs are reported without a JCT."""
    deadline_factor: float | None = None
    """Give jobs without a deadline one: arrival + factor × their run time alone on the GPUs
    they asked for (ElasticFlow's deadline jobs)."""
    loaning: str = "fapes"
    """With inference services: ``dedicated``, ``one-way``, ``fapes`` (FaPES §7.1) or
    ``one-way-blind`` (one-way without taking idle servers first)."""
    forecast: str = "exact"
    """How inference is sized each round (``faasml.cluster.forecast``): ``exact`` (the
    coming round's true load, a bound), ``last`` or ``max`` (over ``forecast_window``
    observed rounds), ``seasonal`` (the same round a day earlier) or ``seasonal-last``
    (the larger of the two), times ``headroom``."""
    forecast_window: int = 5
    headroom: float = 1.0
    inference_start_s: float = 0.0
    """Seconds an inference worker added at a round takes before it serves (its start; on a
    reclaimed server after the training job's checkpoint); 0: at once."""

    def __post_init__(self) -> None:
        check_loaning(self.loaning)
        check_forecast(self.forecast, self.forecast_window, self.headroom)
        if not self.round_s > 0:
            raise ConfigError(f"the value of round is {self.round_s}, but must be > 0 seconds")
        if not 0 <= self.restart_s < math.inf:
            raise ConfigError(
                f"the value of restart_s is {self.restart_s}, but must be a finite number >= 0"
            )
        if not 0 <= self.inference_start_s <= self.round_s:
            raise ConfigError(
                f"the value of inference_start_s is {self.inference_start_s}, but must be "
                f"from 0 to the round ({self.round_s:g} s)"
            )
        if not 0 <= self.noise < math.inf:
            raise ConfigError(
                f"the value of noise is {self.noise}, but must be a finite number >= 0"
            )
        if self.deadline_factor is not None and not 0 < self.deadline_factor < math.inf:
            raise ConfigError(
                f"the value of deadline_factor is {self.deadline_factor}, but must be a finite "
                "number > 0"
            )
        if self.max_time_s is not None and not self.max_time_s >= 0:
            raise ConfigError(f"the value of max_time_s is {self.max_time_s}, but must be >= 0")
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, numbers.Integral)
            or self.seed < 0
        ):
            raise ConfigError(f"the value of seed is {self.seed!r}, but must be an integer >= 0")
