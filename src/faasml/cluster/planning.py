"""FaPES schedule planning for one job against the board (FaPES §5.3, eq. 6 and its DP).

For a job with remaining work ``W`` and goodput curve ``g(n)``, choose the work done in each
future slot so that the completion time plus the total price of the GPU-rounds used is least:
``min_τ  τ + P(τ, W)`` with ``P(τ, W) = min_w P_τ(w) + P(τ − 1, W − w)``. ``P_t(w)`` — the
least price of doing ``w`` in slot ``t`` — takes GPUs from the cheapest servers first
(greedy, as in the paper); the work is discretised in ``chunks`` equal parts. Slots are
``m`` rounds long, ``m`` chosen so that ``slots`` slots cover the job's likely duration
(:func:`slot_bounds`). A plan ends inside its last slot, when its work is done.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from faasml.cluster.board import Board
from faasml.cluster.plain import Placement, SchedulePlan, Segment

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FOREVER = 10**9
"""Rounds added to a plan's last segment: the job keeps it until it finishes (§5.3)."""


@dataclass(frozen=True)
class Pricing:
    """Per-GPU-round price of an idle server (``low``) and of a full one (``high``), in
    seconds of completion time: FaPES's ``H (U/H)^(load/capacity)`` scaled to seconds."""

    low: float
    high: float


def plan_schedule(
    curve: FloatArray,
    work: float,
    board: Board,
    current: Placement,
    pricing: Pricing,
    *,
    round_s: float,
    restart_s: float,
    slots: int,
    chunks: int,
    weight: float = 1.0,
) -> SchedulePlan | None:
    """The schedule plan of least completion time plus resource price, or None when the job
    cannot finish within the planning horizon on what the board leaves free.

    A plan may start late (the job queues opportunistically) but never pauses once started;
    a running job (``current`` non-empty) runs from the first slot. ``weight`` multiplies
    the completion time against the price (a weighted-completion-time objective; 1 = eq. 6
    as printed). The first slot loses
    ``restart_s`` when the GPU count changes.
    """
    top = len(curve) - 1
    if top < 1 or work <= 0 or curve[top] <= 0:
        return None
    good = np.maximum.accumulate(curve)
    fast = work / float(good[top])
    slow = work / float(good[1]) if good[1] > 0 else fast
    bounds = slot_bounds(math.ceil(2.0 * math.sqrt(fast * slow) / round_s), slots)
    market = SlotMarket(board, bounds, pricing)
    programme = _Programme(
        good, work, bounds, market, len(current), round_s, restart_s, chunks, weight
    )
    best = programme.solve()
    if best is None:
        return None
    best_t, best_k, best_n, best_s = best
    sizes = programme.backtrack(best_t, best_k, best_n)
    finish = bounds[best_t] + max(math.ceil(best_s / round_s - 1e-9), 1)
    return _segments(sizes, market, board, current, bounds, finish, good)


_Finish = tuple[float, int, int, float]
"""A way to finish in a slot: (objective, chunks done before it, GPUs, busy seconds in it)."""
_NO_FINISH: _Finish = (math.inf, 0, 0, 0.0)


class _Programme:
    """The dynamic programme of :func:`plan_schedule` over one job's slots: the GPUs and
    price of doing k chunks in each slot, then the least objective of finishing in each."""

    def __init__(
        self,
        good: FloatArray,
        work: float,
        bounds: list[int],
        market: SlotMarket,
        cur_n: int,
        round_s: float,
        restart_s: float,
        chunks: int,
        weight: float,
    ) -> None:
        top = len(good) - 1
        self.good, self.bounds, self.cur_n = good, bounds, cur_n
        self.round_s, self.restart_s, self.weight = round_s, restart_s, weight
        K, T = self.K, self.T = chunks, len(bounds) - 1
        seconds = self.seconds = (bounds[1] - bounds[0]) * round_s  # every slot lasts m rounds
        targets = np.asarray(np.arange(K + 1) * (work / K), dtype=np.float64)
        self.cum, self.avail = market.cheapest(top)
        self._slot_prices(targets)
        # f[k]: least price of k chunks done by the end of the slot, running since the start
        # (continuing: the best split with the slot before; or starting in this slot).
        self.take = _split_index(K)
        self.start = self.cost.copy()
        self.start[:, 0] = np.inf
        if cur_n:
            self.start[1:] = np.inf  # a running job runs from the first slot
        # A plan ends inside its last slot, when the rest of the work is done: its completion
        # time is exact, not rounded up to the slot's end (else starting later looks free).
        # GPU counts that add no goodput are left out (in the first slot, all but the current
        # count, which needs no restart): the same work on fewer GPUs costs no more, and comes
        # first in row-major order, so the least objective found is the same.
        self.rest = work - targets[:K, None]
        self.gain = np.concatenate([[True], good[2:] > good[1:-1]])  # GPU counts 1..top
        # Slots after the first: the (chunks done, GPUs) pairs that finish the rest within one
        # slot, in row-major order, with their busy time and share of the slot.
        gains = np.flatnonzero(self.gain)
        busy_fit = self.rest / good[1:][None, gains]
        self.ks, cols = np.nonzero(busy_fit <= seconds)
        self.bz, self.nz = busy_fit[self.ks, cols], gains[cols]
        self.frac = np.minimum(self.bz / seconds, 1.0)
        self.history = np.empty((T, K + 1))  # f before each slot

    def _slot_prices(self, targets: FloatArray) -> None:
        """GPUs to do k chunks within a slot (the first slot loses the restart when the count
        changes), and their price: ``cost[t, k]`` (infinite where the slot has too few GPUs)."""
        good, seconds, top = self.good, self.seconds, len(self.good) - 1
        counts = np.arange(top + 1)
        w_later = good * seconds
        w_first = np.where(counts == self.cur_n, w_later, good * max(seconds - self.restart_s, 0.0))
        n_later = np.searchsorted(w_later, targets - 1e-9 * targets[1])
        n_first = np.searchsorted(np.maximum.accumulate(w_first), targets - 1e-9 * targets[1])
        n = np.empty((self.T, self.K + 1), dtype=np.int64)
        n[0] = n_first
        n[1:] = n_later
        self.need = np.minimum(n, top)
        rows = np.arange(self.T)[:, None]
        avail = self.avail[:, None]
        self.cost = np.where(n <= avail, self.cum[rows, np.minimum(n, avail)], np.inf)
        self.cost[:, 0] = 0.0

    def solve(self) -> tuple[int, int, int, float] | None:
        """The least objective's (slot, chunks before it, GPUs, busy seconds in it) of
        finishing the work; None when no slot can."""
        K = self.K
        f_ext = np.full(K + 2, np.inf)  # f, and an infinite price at K + 1
        f = f_ext[: K + 1]
        total = np.empty((K + 1, K + 1))
        cont = np.empty(K + 1)
        best_obj, best = math.inf, None
        for t in range(self.T):
            self.history[t] = f
            # Finishing in slot t. Its objective is at least the weighted start of the slot,
            # so no slot from one that starts after the best completion on can do better.
            if self.weight * (self.bounds[t] * self.round_s) >= best_obj - 1e-9:
                break
            found = _NO_FINISH
            if t == 0 and self.avail[0] >= 1:
                found = self._finish_first(f)
            elif t > 0 and self.avail[t] >= 1 and len(self.ks):
                later = self._finish_later(t, f, best_obj)
                if later is None:
                    break
                found = later
            value, k_at, n_at, b_at = found
            if value < best_obj - 1e-9:
                best_obj, best = value, (t, k_at, n_at, b_at)
            # Least price of k chunks by the end of slot t (continuing from the slot before,
            # or starting in it).
            f_ext.take(self.take, out=total)
            total += self.cost[t]
            np.minimum.reduce(total, axis=1, out=cont)
            np.minimum(self.start[t], cont, out=f)
        return best

    def _finish_first(self, f: FloatArray) -> _Finish:
        """The best way to finish in the first slot (a GPU count other than the current one
        pays the restart)."""
        K, cur_n, seconds = self.K, self.cur_n, self.seconds
        before = f.copy()
        before[0] = 0.0
        keep = self.gain[: int(self.avail[0])].copy()
        if 1 <= cur_n <= len(keep):
            keep[cur_n - 1] = True
        ns = np.flatnonzero(keep) + 1
        busy = self.rest / self.good[ns][None, :]
        busy = busy + np.where(ns == cur_n, 0.0, self.restart_s)[None, :]
        spent = before[:K, None] + self.cum[0, ns][None, :] * np.minimum(busy / seconds, 1.0)
        done = self.weight * (self.bounds[0] * self.round_s + busy)
        objective = np.where(busy <= seconds, done + spent, np.inf)
        at = int(np.argmin(objective))
        k_at, col = divmod(at, len(ns))
        return float(objective.flat[at]), k_at, int(ns[col]), float(busy[k_at, col])

    def _finish_later(self, t: int, f: FloatArray, best_obj: float) -> _Finish | None:
        """The best way to finish in slot ``t`` > 0; None when neither it nor any later slot
        can beat ``best_obj`` (a running job)."""
        before = f.copy()
        before[0] = np.inf if self.cur_n else 0.0
        # The objective is at least the weighted start plus the least price before. For
        # a running job (every slot does a chunk or more), that least price never falls
        # from slot to slot, so no later slot can do better either.
        start_s = self.bounds[t] * self.round_s
        least = self.weight * start_s + float(before[: self.K].min())
        if self.cur_n and least >= best_obj - 1e-9:
            return None
        if least >= best_obj - 1e-9:
            return _NO_FINISH
        ks, nz, bz = self.ks, self.nz, self.bz
        spent_v = before[ks] + self.cum[t, nz + 1] * self.frac
        objective_v = self.weight * (start_s + bz) + spent_v
        objective_v = np.where(nz < self.avail[t], objective_v, np.inf)
        at = int(np.argmin(objective_v))
        return float(objective_v[at]), int(ks[at]), int(nz[at]) + 1, float(bz[at])

    def backtrack(self, best_t: int, best_k: int, best_n: int) -> IntArray:
        """GPUs per slot of the plan that finishes in slot ``best_t`` on ``best_n`` GPUs
        after ``best_k`` chunks, walked back through the slots before."""
        sizes = np.zeros(best_t + 1, dtype=np.int64)
        sizes[best_t] = best_n
        k = best_k
        for t in range(best_t - 1, -1, -1):
            if k <= 0:
                break
            row = np.append(self.history[t], np.inf)[self.take[k]] + self.cost[t]
            j = int(np.argmin(row))
            began = bool(self.start[t, k] < row[j])  # the plan starts in this slot
            if began:
                j = k
            sizes[t] = self.need[t][j]
            k -= j
            if began:
                break
        return sizes


class SlotMarket:
    """Free GPUs and per-GPU prices of every server in every slot of a plan (slots ×
    servers), computed once per plan. A server's price depends only on its capacity and free
    GPUs, so prices are computed per (capacity, free) pair and servers are grouped by it."""

    def __init__(self, board: Board, bounds: list[int], pricing: Pricing) -> None:
        self.free = board.free_slots(bounds)
        pair_cap, pair_free, base = board.pairs
        price = board.price_for(pair_free, pair_cap, pricing.low, pricing.high)
        self.pair_price = price * (bounds[1] - bounds[0])
        self.pair = self.free + base[None, :]
        # The pairs from the cheapest (ties: most free GPUs).
        self.by_price = np.lexsort((-pair_free, self.pair_price))
        self.sorted_price = self.pair_price[self.by_price]
        self.sorted_free = pair_free[self.by_price]
        self._rank: IntArray | None = None

    def cheapest(self, top: int) -> tuple[FloatArray, IntArray]:
        """``cum[t, n]``: price of the ``n`` cheapest GPUs free in slot ``t`` (n ≤ top),
        summed from the cheapest; and how many GPUs (up to ``top``) each slot has."""
        slots, pairs = self.free.shape[0], len(self.pair_price)
        per_slot = self.pair + (pairs * np.arange(slots))[:, None]
        servers = np.bincount(per_slot.ravel(), minlength=pairs * slots).reshape(slots, pairs)
        ends = np.cumsum(servers[:, self.by_price] * self.sorted_free, axis=1)
        # which[t, j]: the pair the j-th cheapest GPU of slot t is on (how many pairs' GPUs
        # end at or before it), one search over the slots' rows laid end to end.
        lift = (int(ends[:, -1].max()) + top + 1) * np.arange(slots)[:, None]
        found = np.searchsorted(
            (ends + lift).ravel(), (np.arange(top)[None, :] + lift).ravel(), "right"
        )
        which = found.reshape(slots, top) - pairs * np.arange(slots)[:, None]
        cum = np.zeros((slots, top + 1))
        np.cumsum(self.sorted_price[np.minimum(which, pairs - 1)], axis=1, out=cum[:, 1:])
        return cum, np.minimum(ends[:, -1], top)

    def servers(self, t: int) -> tuple[IntArray, IntArray, FloatArray]:
        """Slot ``t``'s servers with free GPUs from the cheapest (ties: most free GPUs,
        then id), the free GPUs and the price of every server."""
        if self._rank is None:
            # Equal (price, free) pairs rank alike, so that ties fall to the server id.
            keys = np.stack([self.sorted_price, self.sorted_free])
            new = np.concatenate([[True], (np.diff(keys, axis=1) != 0).any(axis=0)])
            self._rank = np.empty(len(self.by_price), dtype=np.int64)
            self._rank[self.by_price] = np.cumsum(new) - 1
        free, pair = self.free[t], self.pair[t]
        some = free.nonzero()[0]
        ranks = self._rank[pair[some]]
        if len(self._rank) <= 256:  # a radix sort of small ranks
            ranks = ranks.astype(np.uint8)
        order = some[ranks.argsort(kind="stable")].astype(np.int64)
        return order, free, self.pair_price[pair]


@functools.lru_cache(maxsize=16)
def _split_index(K: int) -> IntArray:
    """``take[k, j]``: index into ``f`` (with an infinite price at ``K + 1``) of the chunks
    done before a slot that does ``j`` of ``k`` chunks (``j >= 1``)."""
    idx = np.arange(K + 1)
    diff = idx[:, None] - idx[None, :]
    take = np.where((diff >= 0) & (idx[None, :] >= 1), np.clip(diff, 0, K), K + 1)
    take.setflags(write=False)
    return take


def slot_bounds(span: int, slots: int) -> list[int]:
    """Slot boundaries in rounds from now: ``slots`` slots of ``m`` rounds each, ``m`` the
    least that lets them cover ``span`` rounds."""
    m = max(1, math.ceil(span / slots))
    return [t * m for t in range(slots + 1)]


def _segments(
    sizes: IntArray,
    market: SlotMarket,
    board: Board,
    current: Placement,
    bounds: list[int],
    finish: int,
    good: FloatArray,
) -> SchedulePlan:
    """Turn GPUs per slot into placements (keeping earlier servers, §5.3 Fig. 9); the plan
    ends at ``finish`` (rounds from now), when the job is predicted to complete. A job that
    outlives it keeps its GPUs (compensation, applied by the policy)."""
    segments: list[Segment] = []
    prev = current
    planned = 0.0
    r0 = board.origin
    last = len(sizes) - 1
    for t in range(last + 1):
        n = int(sizes[t])
        end = r0 + (finish if t == last else bounds[t + 1])
        free_t = market.free[t]
        if n == 0:
            placement: Placement = ()
        elif n == len(prev) and all(free_t[sid] >= c for sid, c in Counter(prev).items()):
            placement = tuple(sorted(prev))  # what choose_servers keeps: every GPU held
        else:
            order, free, price = market.servers(t)
            placement = choose_servers(n, prev, order, free.copy(), price)
        if segments and segments[-1].placement == placement:
            segments[-1] = Segment(segments[-1].start, end, placement)
        else:
            segments.append(Segment(r0 + bounds[t], end, placement))
        planned += (float(good[n]) if n else 0.0) * (end - r0 - bounds[t])
        prev = placement
    top = float(good[-1])
    return SchedulePlan(tuple(segments), planned / (finish * top) if top > 0 else 0.0)


def choose_servers(
    n: int, prev: Placement, order: IntArray, free: IntArray, price: FloatArray
) -> Placement:
    """``n`` GPUs: keep the previous servers (dropping the dearest first when scaling down),
    then add the cheapest (FaPES §5.3, Fig. 9). ``free`` is consumed."""
    if n <= 0:
        return ()
    keep: list[int] = []
    held = Counter(prev)
    for sid in sorted(held, key=lambda s: (price[s], -held[s], s)):
        take = int(min(held[sid], free[sid], n - len(keep)))
        if take > 0:
            keep.extend([sid] * take)
            free[sid] -= take
        if len(keep) == n:
            break
    for sid in order:
        if len(keep) == n:
            break
        take = int(min(free[sid], n - len(keep)))
        if take > 0:
            keep.extend([int(sid)] * take)
            free[sid] -= take
    return tuple(sorted(keep))
