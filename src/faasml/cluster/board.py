"""FaPES-Board (FaPES §3, §5.3): forward-looking GPU occupation per server and round, and the
resource prices derived from it.

The board is rebuilt at every scheduling round from the schedule plans of the jobs that keep
them (so the policy stays a pure function of its inputs), then updated as each job of the
scheduling cohort receives its plan.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from faasml.cluster.plain import Cluster, Placement, SchedulePlan

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Board:
    """Occupied GPUs ``load[server, round]`` for ``rounds`` rounds from round ``origin``.

    Occupation beyond the last round is represented by the last column (plans that run past
    the horizon keep their final placement there). It is stored round-major (``by_round``),
    so that the peak over a span of rounds reads contiguous rows.
    """

    def __init__(self, cluster: Cluster, origin: int, rounds: int) -> None:
        self.cluster = cluster
        self.origin = origin
        self.rounds = max(rounds, 1)
        self.capacity = np.array(cluster.capacity(), dtype=np.int64)
        self.by_round = np.zeros((self.rounds, len(self.capacity)), dtype=np.int32)

    @property
    def load(self) -> npt.NDArray[np.int32]:
        """Occupied GPUs by server and round (a view of ``by_round``)."""
        return self.by_round.T

    @functools.cached_property
    def pairs(self) -> tuple[IntArray, IntArray, IntArray]:
        """Every (capacity, free GPUs) pair a server of this cluster can be in — capacities
        and free GPUs — and the index of each server's pair with no GPU free."""
        caps = np.unique(self.capacity)
        pair_cap = np.concatenate([np.full(c + 1, c) for c in caps])
        pair_free = np.concatenate([np.arange(c + 1) for c in caps])
        offset = np.concatenate([[0], np.cumsum(caps + 1)[:-1]])
        return pair_cap, pair_free, offset[np.searchsorted(caps, self.capacity)]

    def occupy(self, placement: Placement, start: int, end: int, sign: int = 1) -> None:
        """Mark ``placement`` as held from absolute round ``start`` to ``end`` (exclusive);
        ``sign=-1`` releases it again."""
        a = max(start - self.origin, 0)
        b = min(end - self.origin, self.rounds) if end < 2**62 else self.rounds
        if end - self.origin > self.rounds:
            b = self.rounds
        if a >= b or not placement:
            return
        rows = self.by_round[a:b]
        for sid, count in _runs(placement):
            rows[:, sid] += sign * count

    def add_plan(self, plan: SchedulePlan) -> None:
        for seg in plan.segments:
            self.occupy(seg.placement, seg.start, seg.end)

    def free_in(self, a: int, b: int) -> IntArray:
        """GPUs free on every server throughout relative rounds ``a`` to ``b`` (exclusive)."""
        a = min(max(a, 0), self.rounds - 1)
        b = min(max(b, a + 1), self.rounds)
        peak = self.by_round[a:b].max(axis=0)
        return np.maximum(self.capacity - peak, 0)

    def free_slots(self, bounds: list[int]) -> IntArray:
        """:meth:`free_in` of every slot ``bounds[t]`` to ``bounds[t + 1]`` at once: an array
        of slots × servers."""
        slots = len(bounds) - 1
        peak = np.empty((slots, len(self.capacity)), dtype=np.int32)
        inside = 0  # leading slots that lie within the board, back to back
        while inside < slots and 0 <= bounds[inside] < bounds[inside + 1] <= self.rounds:
            inside += 1
        if inside:
            width = bounds[1] - bounds[0]
            if all(bounds[t + 1] - bounds[t] == width for t in range(inside)):
                block = self.by_round[bounds[0] : bounds[inside]]
                shape = (inside, width, len(self.capacity))
                np.max(block.reshape(shape), axis=1, out=peak[:inside])
            else:
                starts = np.asarray(bounds[:inside], dtype=np.intp)
                block = self.by_round[: bounds[inside]]
                peak[:inside] = np.maximum.reduceat(block, starts, axis=0)
        seen: dict[tuple[int, int], npt.NDArray[np.int32]] = {}
        for t in range(inside, slots):
            a = min(max(bounds[t], 0), self.rounds - 1)
            b = min(max(bounds[t + 1], a + 1), self.rounds)
            if (a, b) not in seen:
                seen[(a, b)] = self.by_round[a:b].max(axis=0)
            peak[t] = seen[(a, b)]
        return np.maximum(self.capacity[None, :] - peak, 0)

    def price(self, free: IntArray, low: float, high: float) -> FloatArray:
        """Per-GPU price of each server: ``H (U/H)^(load/capacity)`` (FaPES §5.3), scaled so
        that an idle server costs ``low`` and a full one ``high``."""
        capacity = self.capacity if free.ndim == 1 else self.capacity[:, None]
        return self.price_for(free, capacity, low, high)

    @staticmethod
    def price_for(free: IntArray, capacity: IntArray, low: float, high: float) -> FloatArray:
        """:meth:`price` of servers with ``free`` GPUs out of ``capacity``."""
        load = 1.0 - free / capacity
        ratio = max(high / low, 1.0) if low > 0 else 1.0
        return np.asarray(low * ratio**load, dtype=np.float64)


def _runs(placement: Placement) -> list[tuple[int, int]]:
    """(server, GPUs) of a placement: the runs of equal ids of the sorted tuple."""
    out: list[tuple[int, int]] = []
    for sid in sorted(placement):
        if out and out[-1][0] == sid:
            out[-1] = (sid, out[-1][1] + 1)
        else:
            out.append((sid, 1))
    return out
