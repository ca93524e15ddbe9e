"""FaPES-Board (FaPES §3, §5.3): forward-looking GPU occupation per server and round, and the
resource prices derived from it.

The board is rebuilt at every scheduling round from the schedule plans of the jobs that keep
them (so the policy stays a pure function of its inputs), then updated as each job of the
scheduling cohort receives its plan.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from faasml.cluster.records import Cluster, Placement, SchedulePlan

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Board:
    """Occupied GPUs ``load[server, round]`` for ``rounds`` rounds from round ``origin``.

    Occupation beyond the last round is represented by the last column (plans that run past
    the horizon keep their final placement there).
    """

    def __init__(self, cluster: Cluster, origin: int, rounds: int) -> None:
        self.cluster = cluster
        self.origin = origin
        self.rounds = max(rounds, 1)
        self.capacity = np.array(cluster.capacity(), dtype=np.int64)
        self.load = np.zeros((len(self.capacity), self.rounds), dtype=np.int64)

    def occupy(self, placement: Placement, start: int, end: int, sign: int = 1) -> None:
        """Mark ``placement`` as held from absolute round ``start`` to ``end`` (exclusive);
        ``sign=-1`` releases it again."""
        a = max(start - self.origin, 0)
        b = min(end - self.origin, self.rounds) if end < 2**62 else self.rounds
        if end - self.origin > self.rounds:
            b = self.rounds
        if a >= b or not placement:
            return
        for sid, count in Counter(placement).items():
            self.load[sid, a:b] += sign * count

    def add_plan(self, plan: SchedulePlan) -> None:
        for seg in plan.segments:
            self.occupy(seg.placement, seg.start, seg.end)

    def free_in(self, a: int, b: int) -> IntArray:
        """GPUs free on every server throughout relative rounds ``a`` to ``b`` (exclusive)."""
        a = min(max(a, 0), self.rounds - 1)
        b = min(max(b, a + 1), self.rounds)
        peak = self.load[:, a:b].max(axis=1)
        return np.maximum(self.capacity - peak, 0)

    def price(self, free: IntArray, low: float, high: float) -> FloatArray:
        """Per-GPU price of each server: ``H (U/H)^(load/capacity)`` (FaPES §5.3), scaled so
        that an idle server costs ``low`` and a full one ``high``."""
        load = 1.0 - free / self.capacity
        ratio = max(high / low, 1.0) if low > 0 else 1.0
        return np.asarray(low * ratio**load, dtype=np.float64)
