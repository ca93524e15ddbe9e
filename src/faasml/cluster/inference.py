"""Inference services of cluster mode: request-rate traces, services and their scaling.

FaPES §3.2–§3.3: an inference function has a ``min_scale`` (workers its developer asks to be
guaranteed) and a ``max_scale`` (workers it may grow to under unexpected peaks); FaPES-
Scheduler serves them first, inside the inference virtual cluster. Here each service also has
a request-rate trace and a per-GPU serving capacity at its SLO, so the workers it needs follow
its load: ``ceil(rate / capacity_rps)`` clamped to ``[min_scale, max_scale]`` (one worker =
one GPU).

Request-rate traces are piecewise constant: the rate at ``times_s[i]`` holds until the next
point, and the last one holds for ever; times before 0 are load the service had before the
simulation began (what a day-ahead forecast reads; files start at 0). ``tidal_trace`` makes a
seeded diurnal ("tidal") load with bursts whose shape follows FaPES Fig. 1 (busy days, quiet
nights at about a quarter of the peak: per-GPU utilisation 41.2 % at peak against 10 % at
night); ``load_rate_csv`` reads a ``time_s,requests_per_s`` CSV; ``load_services`` reads a
services YAML file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from faasml._validate import Fields, load_yaml
from faasml.cluster.traces import TraceError, _csv_rows, _names
from faasml.exceptions import ConfigError

FloatArray = npt.NDArray[np.float64]

DAY_S = 86400.0
MAX_RATE = 1e9
"""The largest request rate accepted (requests per second)."""
MAX_POINTS = 2_000_000
"""The most points a rate trace may have."""


class ServiceError(ConfigError):
    """A services file or a rate trace breaks a rule; the message names the value and rule."""


@dataclass(frozen=True, eq=False)
class RateTrace:
    """Requests per second over time, piecewise constant (see the module docstring)."""

    times_s: FloatArray
    rates: FloatArray

    def __post_init__(self) -> None:
        t, r = self.times_s, self.rates
        if t.ndim != 1 or t.shape != r.shape or len(t) == 0:
            raise ServiceError("a rate trace needs one rate per time, and at least one point")
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(r))):
            raise ServiceError("a rate trace holds a value that is not finite")
        if np.any(np.diff(t) <= 0):  # times before 0: load before the simulation began
            raise ServiceError("the times of a rate trace must increase")
        if np.any(r < 0):
            i = int(np.argmax(r < 0))
            raise ServiceError(
                f"the rate at {t[i]:g} s is {r[i]:g} requests/s, but rates must be >= 0"
            )

    @property
    def peak(self) -> float:
        return float(self.rates.max())

    def pieces(self, t0: float, t1: float) -> tuple[FloatArray, FloatArray]:
        """Durations and rates of the constant pieces covering ``[t0, t1)``."""
        if t1 <= t0:
            return np.zeros(0), np.zeros(0)
        t = self.times_s
        inner = t[(t > t0) & (t < t1)]
        edges = np.concatenate([[t0], inner, [t1]])
        idx = np.searchsorted(t, edges[:-1], side="right") - 1
        rates = np.where(idx >= 0, self.rates[np.maximum(idx, 0)], 0.0)
        return np.diff(edges), rates

    def rate_at(self, t: float) -> float:
        i = int(np.searchsorted(self.times_s, t, side="right")) - 1
        return float(self.rates[i]) if i >= 0 else 0.0

    def peak_between(self, t0: float, t1: float) -> float:
        """The highest rate in ``[t0, t1)`` (the load a round must be provisioned for)."""
        _, rates = self.pieces(t0, max(t1, t0 + 1e-9))
        return float(rates.max()) if len(rates) else 0.0


def tidal_trace(
    peak_rps: float,
    *,
    days: float = 8.0,
    step_s: float = 60.0,
    trough_ratio: float = 0.25,
    peak_hour: float = 14.0,
    bursts_per_day: float = 3.0,
    burst_factor: tuple[float, float] = (1.2, 1.6),
    burst_minutes: tuple[float, float] = (5.0, 30.0),
    noise: float = 0.05,
    seed: int = 0,
) -> RateTrace:
    """A seeded tidal (diurnal) load with bursts, shaped after FaPES Fig. 1.

    ``rate(t) = peak · tide(t) · noise(t) · burst(t)``: ``tide`` a daily raised cosine from
    ``trough_ratio`` (night, 12 h from ``peak_hour``) to 1 (at ``peak_hour``); ``noise`` a
    smoothed log-normal factor (std ``noise``, 10-minute correlation); bursts arrive as a
    Poisson process (``bursts_per_day``), each multiplying the rate by a factor drawn from
    ``burst_factor`` for ``burst_minutes``. The tide's peak is ``peak_rps``; bursts go above
    it (the unexpected peaks ``max_scale`` is for, FaPES §3.2).
    """
    if not peak_rps >= 0 or not math.isfinite(peak_rps) or peak_rps > MAX_RATE:
        raise ServiceError(f"the value of peak_rps is {peak_rps}, but must be from 0 to 1e9")
    if not 0 <= trough_ratio <= 1:
        raise ServiceError(f"the value of trough_ratio is {trough_ratio}, but must be in [0, 1]")
    if not step_s > 0 or not days > 0 or days * DAY_S / step_s > MAX_POINTS:
        raise ServiceError(
            f"days {days} and step_s {step_s} must be > 0 and give at most {MAX_POINTS} points"
        )
    if bursts_per_day < 0 or noise < 0:
        raise ServiceError("bursts_per_day and noise must be >= 0")
    if not 0 < burst_factor[0] <= burst_factor[1] or not 0 < burst_minutes[0] <= burst_minutes[1]:
        raise ServiceError("burst_factor and burst_minutes must be ranges (low, high) above 0")
    rng = np.random.default_rng(seed)
    times = np.arange(0.0, days * DAY_S, step_s)
    phase = 2 * math.pi * (times / DAY_S - peak_hour / 24.0)
    tide = trough_ratio + (1 - trough_ratio) * 0.5 * (1 + np.cos(phase))
    factor = np.ones_like(times)
    if noise > 0:
        keep = math.exp(-step_s / 600.0)
        eps = rng.normal(0.0, noise * math.sqrt(1 - keep * keep), len(times))
        walk = np.empty_like(times)
        walk[0] = rng.normal(0.0, noise)
        for i in range(1, len(times)):
            walk[i] = keep * walk[i - 1] + eps[i]
        factor = np.exp(walk)
    burst = np.ones_like(times)
    count = rng.poisson(bursts_per_day * days)
    for start in np.sort(rng.uniform(0.0, days * DAY_S, count)):
        length = rng.uniform(*burst_minutes) * 60.0
        scale = rng.uniform(*burst_factor)
        inside = (times >= start) & (times < start + length)
        burst[inside] = np.maximum(burst[inside], scale)
    rates = np.clip(peak_rps * tide * factor * burst, 0.0, MAX_RATE)
    return RateTrace(times, rates)


def load_rate_csv(path: str | Path) -> RateTrace:
    """A ``time_s,requests_per_s`` CSV (header line, then one point per row, times
    increasing, rates >= 0); a bad file raises ``TraceError`` naming the line and rule."""
    path = Path(path)
    kind = "rate trace"
    header, body = _csv_rows(path, kind)
    want = ["time_s", "requests_per_s"]
    if sorted(header) != sorted(want):
        raise TraceError(
            f"{kind} {path}: the header is {_names(header) or 'empty'}, but must be the "
            "columns time_s,requests_per_s"
        )
    if not body:
        raise TraceError(f"{kind} {path} has no rows below its header")
    if len(body) > MAX_POINTS:
        raise TraceError(f"{kind} {path} has {len(body)} rows, but may have at most {MAX_POINTS}")
    col = {name: header.index(name) for name in want}
    times, rates = np.empty(len(body)), np.empty(len(body))
    last = -math.inf
    for i, (line, row) in enumerate(body):
        where = f"{kind} {path}:{line}"
        values = []
        for name in want:
            text = row[col[name]].strip()
            try:
                value = float(text)
            except ValueError:
                raise TraceError(
                    f"{where}: the value of {name} is {text!r}, but must be a number"
                ) from None
            if not math.isfinite(value):
                raise TraceError(f"{where}: the value of {name} is {text!r}, but must be finite")
            values.append(value)
        t, r = values
        if t < 0 or t > 1e11:
            raise TraceError(f"{where}: the value of time_s is {t:g}, but must be from 0 to 1e11")
        if t <= last:
            raise TraceError(
                f"{where}: the value of time_s is {t:g}, but times must increase "
                f"(the row above has {last:g})"
            )
        if r < 0 or r > MAX_RATE:
            raise TraceError(
                f"{where}: the value of requests_per_s is {r:g}, but must be from 0 to 1e9"
            )
        times[i], rates[i], last = t, r, t
    return RateTrace(times, rates)


@dataclass(frozen=True, eq=False)
class InferenceService:
    """An inference service (FaPES §3.2's inference function, with a load trace).

    ``capacity_rps`` is the request rate one GPU serves within the SLO; ``latency_ms`` the
    latency of one request on one GPU (an SLO below it cannot be met by any number of
    GPUs); ``min_scale``/``max_scale`` bound its workers (GPUs)."""

    name: str
    rate: RateTrace
    capacity_rps: float
    slo_ms: float
    min_scale: int = 1
    max_scale: int = 1_000_000
    latency_ms: float = 0.0

    def __post_init__(self) -> None:
        where = f"service {self.name!r}"
        if not self.capacity_rps > 0 or not math.isfinite(self.capacity_rps):
            raise ServiceError(
                f"{where}: the value of capacity_rps is {self.capacity_rps}, but must be > 0"
            )
        if not self.slo_ms > 0 or not math.isfinite(self.slo_ms):
            raise ServiceError(f"{where}: the value of slo_ms is {self.slo_ms}, but must be > 0")
        if self.latency_ms < 0:
            raise ServiceError(
                f"{where}: the value of latency_ms is {self.latency_ms}, but must be >= 0"
            )
        if self.latency_ms > self.slo_ms:
            raise ServiceError(
                f"{where}: the value of slo_ms is {self.slo_ms:g}, but no GPU can meet it: "
                f"one request takes {self.latency_ms:g} ms (latency_ms) on a GPU"
            )
        if self.min_scale < 0:
            raise ServiceError(
                f"{where}: the value of min_scale is {self.min_scale}, but must be >= 0"
            )
        if self.max_scale < max(self.min_scale, 1):
            raise ServiceError(
                f"{where}: the value of min_scale is {self.min_scale}, but must be <= "
                f"max_scale ({self.max_scale}), and max_scale >= 1"
            )

    def workers_for(self, rate: float) -> int:
        """GPUs that serve ``rate`` within the SLO, clamped to ``[min_scale, max_scale]``."""
        need = math.ceil(rate / self.capacity_rps - 1e-9) if rate > 0 else 0
        return min(max(need, self.min_scale), self.max_scale)

    def peak_workers(self) -> int:
        """Workers at the trace's peak rate (FaPES §7.1's N_r^max counts these)."""
        return self.workers_for(self.rate.peak)


@dataclass
class ServiceTally:
    """SLO attainment of one service, accumulated over the simulation."""

    seconds: float = 0.0
    seconds_ok: float = 0.0
    requests: float = 0.0
    requests_ok: float = 0.0
    gpu_s: float = 0.0

    def add(
        self,
        service: InferenceService,
        gpus: int,
        t0: float,
        t1: float,
        before: int | None = None,
        start_s: float = 0.0,
    ) -> None:
        """Serve ``[t0, t1)`` on ``gpus`` GPUs: the requests beyond their capacity miss the
        SLO (they queue), those within it meet it. With ``before`` (the GPUs of the round
        before) below ``gpus``, the added workers serve only from ``t0 + start_s`` (they are
        starting); they hold their GPUs from ``t0``."""
        self.gpu_s += gpus * max(t1 - t0, 0.0)
        if before is not None and before < gpus and start_s > 0:
            mid = min(t0 + start_s, t1)
            self._serve(service, before, t0, mid)
            self._serve(service, gpus, mid, t1)
        else:
            self._serve(service, gpus, t0, t1)

    def _serve(self, service: InferenceService, gpus: int, t0: float, t1: float) -> None:
        durations, rates = service.rate.pieces(t0, t1)
        capacity = gpus * service.capacity_rps
        self.seconds += float(durations.sum())
        self.seconds_ok += float(durations[rates <= capacity + 1e-9].sum())
        self.requests += float((durations * rates).sum())
        self.requests_ok += float((durations * np.minimum(rates, capacity)).sum())

    @property
    def time_share(self) -> float:
        return self.seconds_ok / self.seconds if self.seconds else 1.0

    @property
    def request_share(self) -> float:
        return self.requests_ok / self.requests if self.requests else 1.0


def _service(item: object, index: int, base: Path) -> InferenceService:
    f = Fields(item, f"services[{index}]", ServiceError)
    name = f.text("name")
    rate = f.sub("rate")
    if rate.has("csv") == rate.has("tidal"):
        raise ServiceError(f"{rate.where} must have exactly one of: csv, tidal")
    if rate.has("csv"):
        csv = Path(rate.text("csv")).expanduser()
        trace = load_rate_csv(csv if csv.is_absolute() else base / csv)
    else:
        t = rate.sub("tidal")
        trace = tidal_trace(
            t.number("peak_rps", minimum=0, maximum=MAX_RATE),
            days=t.number("days", 8.0, minimum=0, strict_minimum=True, maximum=400),
            step_s=t.number("step_s", 60.0, minimum=1),
            trough_ratio=t.number("trough_ratio", 0.25, minimum=0, maximum=1),
            peak_hour=t.number("peak_hour", 14.0, minimum=0, maximum=24),
            bursts_per_day=t.number("bursts_per_day", 3.0, minimum=0, maximum=1000),
            noise=t.number("noise", 0.05, minimum=0, maximum=1),
            seed=t.integer("seed", 0, minimum=0),
        )
        t.finish()
    rate.finish()
    capacity = f.number("capacity_rps", minimum=0, strict_minimum=True)
    slo = f.number("slo_ms", minimum=0, strict_minimum=True)
    latency = f.number("latency_ms", 0.0, minimum=0)
    low = f.integer("min_scale", 1, minimum=0, maximum=1_000_000)
    high = f.integer("max_scale", minimum=1, maximum=1_000_000)
    f.finish()
    return InferenceService(name, trace, capacity, slo, low, high, latency)


def load_services(path: str | Path) -> list[InferenceService]:
    """Services from a YAML file (see docs/cluster.md, "Inference services and loans")."""
    path = Path(path)
    f = Fields(load_yaml(path, ServiceError), str(path), ServiceError)
    services = [_service(item, i, path.parent) for i, item in enumerate(f.items("services"))]
    f.finish()
    names = [s.name for s in services]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ServiceError(f"{path}: service name(s) {', '.join(map(repr, twice))} given twice")
    return services


def inference_gpus(services: Sequence[InferenceService], rates: Sequence[float]) -> list[int]:
    """Workers of each service for the given rates (SLO first: each gets what it needs)."""
    return [s.workers_for(r) for s, r in zip(services, rates, strict=True)]
