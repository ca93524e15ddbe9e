"""Forecasts of an inference service's load for the coming round (FaPES §3, §5).

FaPES-Manager scales each inference service every round to meet its SLO (workers by
``min_scale``/``max_scale``, §3.2–§3.3; §5). It can only size the coming round from the load
observed so far. The forecasts here map the observed history to the rate to provision for:

- ``exact``: the coming round's true peak rate (an oracle; the bound, not a real manager).
- ``last``: the last observed round's peak rate (purely reactive: a step up is missed for one
  round).
- ``max``: the largest observed round peak over the last ``window`` rounds. This is the rule
  of Kubernetes' Horizontal Pod Autoscaler for scaling down (its stabilisation window keeps
  the highest recommendation of the last 5 minutes: five 60 s rounds here): tidal load rises
  slowly, so the recent peak nearly covers the next round, and holding it through a short
  dip avoids lending a server that is wanted back a round later. Chosen over an EWMA, which
  lags under every rise (the whole morning ramp) and so misses the SLO more for the same
  capacity.
- ``seasonal``: day-ahead. The peak rate of the same round one period (a day) earlier:
  tidal load repeats daily (FaPES Fig. 1), so yesterday's round foresees today's morning
  rise, which every reactive forecast meets a round late. Before the service has been
  observed for a period (the trace's first point), it falls back to ``max``. A burst
  today is not foreseen, and yesterday's burst is provisioned for again.
- ``seasonal-last``: the larger of ``seasonal`` and ``last``: the rise foreseen, today's
  noise and bursts seen a round late.

Every forecast is multiplied by ``headroom`` (>= 1: spare capacity for a rise within the
round, e.g. a burst). Pure functions: no I/O, no state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from faasml.cluster.inference import RateTrace
from faasml.exceptions import ConfigError

FORECASTS = ("exact", "last", "max", "seasonal", "seasonal-last")
MAX_WINDOW = 1440
"""The longest window of ``max`` (rounds)."""
PERIOD_S = 86400.0
"""The period of ``seasonal``: the tide's (a day)."""


def check_forecast(name: str, window: int = 5, headroom: float = 1.0) -> str:
    """``name`` if it is a forecast and ``window``/``headroom`` are valid; else ConfigError."""
    if name not in FORECASTS:
        raise ConfigError(
            f"the value of forecast is {name!r}, but must be one of: {', '.join(FORECASTS)}"
        )
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
        raise ConfigError(
            f"the value of forecast_window is {window!r}, but must be an integer from 1 to "
            f"{MAX_WINDOW} (rounds)"
        )
    if not (math.isfinite(headroom) and 1.0 <= headroom <= 10.0):
        raise ConfigError(f"the value of headroom is {headroom!r}, but must be from 1 to 10")
    return name


def predict(name: str, history: Sequence[float], window: int = 5, headroom: float = 1.0) -> float:
    """The rate to provision for, from ``history``: the observed peak rate of each past
    round, oldest first (the last is the round just ended). No history forecasts 0 (the
    service then gets ``min_scale``). ``exact`` needs the future and ``seasonal`` the
    trace a period ago: use ``provision_rate`` (``seasonal`` here is its fallback, ``max``)."""
    check_forecast(name, window, headroom)
    if name == "exact":
        raise ConfigError("the exact forecast needs the coming round's load, not the history")
    if not history:
        return 0.0
    if name == "last":
        return headroom * history[-1]
    return headroom * max(history[-window:])  # max, and seasonal's fallback


def observed_peaks(trace: RateTrace, now: float, round_s: float, rounds: int) -> list[float]:
    """The peak rate of each of the ``rounds`` rounds before ``now``, oldest first (rounds
    before time 0 are left out, unless the trace starts before 0: a service that ran
    before the simulation began, whose past is known)."""
    origin = min(0.0, float(trace.times_s[0])) if len(trace.times_s) else 0.0
    out = []
    for k in range(rounds, 0, -1):
        t0 = now - k * round_s
        if t0 + round_s <= origin:
            continue
        out.append(trace.peak_between(max(t0, origin), now - (k - 1) * round_s))
    return out


def seasonal_peak(
    trace: RateTrace, now: float, round_s: float, period_s: float = PERIOD_S
) -> float | None:
    """The peak rate of ``[now, now + round_s)`` one period earlier, or None when the
    service had not started then (its trace's first point is later)."""
    then = now - period_s
    if not len(trace.times_s) or then < float(trace.times_s[0]):
        return None
    return trace.peak_between(then, then + round_s)


def provision_rate(
    trace: RateTrace,
    now: float,
    round_s: float,
    name: str = "exact",
    window: int = 5,
    headroom: float = 1.0,
    period_s: float = PERIOD_S,
) -> float:
    """The rate a service is provisioned for over ``[now, now + round_s)`` under forecast
    ``name``: only ``exact`` looks past ``now``."""
    check_forecast(name, window, headroom)
    if name == "exact":
        return headroom * trace.peak_between(now, now + round_s)
    if name.startswith("seasonal"):
        past = seasonal_peak(trace, now, round_s, period_s)
        if past is not None:
            if name == "seasonal-last":
                past = max([past, *observed_peaks(trace, now, round_s, 1)])
            return headroom * past
    need = 1 if name == "last" else window
    return predict(name, observed_peaks(trace, now, round_s, need), window, headroom)
