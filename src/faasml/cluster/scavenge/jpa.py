"""The Job Profiling Advisor (MalleTrain §3.1.3) and the Job Monitor's records.

A job arrives with no scalability information. On its first allocation the JPA profiles it
online, in *inverse order*: scale up once to the largest count it can afford, measure, then
scale down through smaller counts, measuring at each — one slow scale-up and several fast
scale-downs, instead of a scale-up per count when stepping up (Fig. 3.4). The measured points
are fitted (:func:`~faasml.cluster.scavenge.curves.fit_curve`) and handed to the allocator;
the Job Monitor keeps adding the throughput it observes at other counts while the job runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from faasml.cluster.scavenge.curves import FittedCurve, fit_curve


def profile_counts(top: int, low: int) -> tuple[int, ...]:
    """Counts to measure, largest first: ``top``, then the powers of two below it, down to
    ``low`` (included)."""
    if top < low:
        return ()
    counts = [top]
    power = 1
    while power * 2 < top:
        power *= 2
    while power > low:
        if power < counts[-1]:
            counts.append(power)
        power //= 2
    if counts[-1] != low:
        counts.append(low)
    return tuple(counts)


def inverse_order(top: int, low: int) -> tuple[int, ...]:
    """The JPA's schedule: one scale-up to ``top``, then down (MalleTrain Fig. 3.4 (a))."""
    return profile_counts(top, low)


def step_up_order(top: int, low: int) -> tuple[int, ...]:
    """The naive schedule: the same counts, smallest first (Fig. 3.4 (b))."""
    return tuple(reversed(profile_counts(top, low)))


@dataclass(frozen=True)
class ProfilingCost:
    """What a profiling schedule costs: its rescales and the node-seconds its nodes spend
    paused in them, and its total duration."""

    scale_ups: int
    scale_downs: int
    paused_node_s: float
    duration_s: float
    node_s: float


def schedule_cost(
    order: Sequence[int], measure_s: float, scale_up_s: float, scale_down_s: float
) -> ProfilingCost:
    """The cost of measuring ``order`` (counts in sequence, starting from no nodes): every
    change of count pauses the job for its rescale cost on the new count's nodes."""
    ups = downs = 0
    paused = duration = node_s = 0.0
    previous = 0
    for count in order:
        pause = scale_up_s if count > previous else scale_down_s
        if count > previous:
            ups += 1
        else:
            downs += 1
        paused += pause * count
        duration += pause + measure_s
        node_s += (pause + measure_s) * count
        previous = count
    return ProfilingCost(ups, downs, paused, duration, node_s)


def settled(points: dict[int, float], tolerance: float = 0.05, least: int = 2) -> bool:
    """Whether profiling may stop early (it needs ``least`` measurements at the least).

    Amdahl's law S(n) = S(1)·n/(1 + σ(n − 1)) has two parameters, so two measurements
    determine it: with two, stop if the law through them is a valid one (0 ≤ σ ≤ 1: more
    nodes are faster, but not superlinearly); with three or more, stop if the curve fitted
    to all but the latest predicts the latest within ``tolerance``. A stop saves the smaller
    counts, which cost time at few nodes (the nodes released find no taker when the other
    jobs are at their max, and the job pays a scale-up back); the Job Monitor goes on
    refining the curve from the counts the job runs at later."""
    if len(points) < max(least, 2):
        return False
    latest = min(points)  # inverse order: the latest measurement is the smallest count
    if len(points) == 2:
        (small, s_small), (big, s_big) = sorted(points.items())
        # n/S(n) = (1 − σ)/S(1) + σ·n/S(1): a line in n; 0 ≤ σ ≤ 1 iff slope, intercept ≥ 0.
        slope = (big / s_big - small / s_small) / (big - small)
        intercept = small / s_small - slope * small
        return slope >= 0 and intercept >= 0
    rest = {n: s for n, s in points.items() if n != latest}
    predicted = float(fit_curve(rest).amdahl(latest))
    return abs(predicted - points[latest]) <= tolerance * points[latest]


@dataclass
class JobMonitor:
    """Throughput records of one job (nodes → samples/s), from profiling and from running;
    the latest record at a count wins. ``curve()`` is the JPA's fit of them."""

    points: dict[int, float] = field(default_factory=dict)
    _fitted: tuple[tuple[tuple[int, float], ...], FittedCurve] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def record(self, nodes: int, samples_per_s: float) -> None:
        if nodes > 0 and samples_per_s > 0:
            self.points[int(nodes)] = float(samples_per_s)

    def known(self) -> bool:
        return bool(self.points)

    def curve(self) -> FittedCurve:
        """The fit of the records, refitted only when they changed (the allocator asks for
        every running job's curve at every event)."""
        key = tuple(sorted(self.points.items()))
        if self._fitted is None or self._fitted[0] != key:
            self._fitted = (key, fit_curve(self.points))
        return self._fitted[1]
