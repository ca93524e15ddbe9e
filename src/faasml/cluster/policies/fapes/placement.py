"""Which servers the FaPES jobs get: conflicts between plans resolved, servers restored to
jobs whose GPU count is unchanged, and plans that follow the servers their jobs got."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from faasml.cluster.policies._base import pack
from faasml.cluster.records import (
    Cluster,
    ClusterAllocation,
    Placement,
    SchedulePlan,
    Segment,
)


def _repair(
    wanted: dict[str, Placement], cluster: Cluster, priority: list[str]
) -> dict[str, Placement]:
    """Resolve conflicts between plans made at different rounds: jobs outside the cohort,
    then the cohort in priority order, keep their servers where free; the rest are packed
    on free GPUs, or wait. (Serving first the jobs outside the cohort that keep their
    placement was tried: it queued jobs longer where few GPUs are left to training —
    benchmarks/results/fapes_loans.md; :func:`restore_servers` saves those restarts without
    that.)"""
    rank = {name: i for i, name in enumerate(priority)}
    names = sorted(wanted, key=lambda n: (n in rank, rank.get(n, 0), n))
    free = np.array(cluster.capacity(), dtype=np.int64)
    switch = np.array([s.switch for s in cluster.servers])
    out: dict[str, Placement] = {}
    conflicted: list[str] = []
    for name in names:
        need = Counter(wanted[name])
        if all(free[sid] >= c for sid, c in need.items()):
            for sid, c in need.items():
                free[sid] -= c
            out[name] = wanted[name]
        else:
            conflicted.append(name)
    for name in conflicted:
        if int(free.sum()) >= len(wanted[name]):
            out[name] = pack(len(wanted[name]), free, switch)
    return out


def follow_plan(
    plan: SchedulePlan,
    r0: int,
    allocated: Placement,
    settled: Placement,
    cluster: Cluster,
) -> SchedulePlan:
    """``plan`` with the servers it wants at round ``r0`` replaced by those the job got with
    the same GPU count: ``allocated`` (this round's decision) or else ``settled`` (before
    back-filling added GPUs for this round only). Every segment from ``r0`` on that holds
    the replaced GPUs gets the job's own instead, where the servers have room; ``plan``
    itself is returned when nothing changes."""
    at = plan.placement_at(r0)
    if not at:
        return plan
    if len(allocated) == len(at):
        got = allocated
    elif len(settled) == len(at):
        got = settled
    else:
        return plan
    removed = Counter(at) - Counter(got)
    if not removed:
        return plan
    added = Counter(got) - Counter(at)
    cap = cluster.capacity()
    segments: list[Segment] = []
    for seg in plan.segments:
        mine = Counter(seg.placement)
        if seg.end > r0 and all(mine[s] >= c for s, c in removed.items()):
            swapped = mine - removed + added
            if all(c <= cap[s] for s, c in swapped.items()):
                seg = Segment(seg.start, seg.end, tuple(sorted(swapped.elements())))
        segments.append(seg)
    return SchedulePlan(tuple(segments), plan.achievement)


def restore_servers(
    allocation: dict[str, Placement], current: ClusterAllocation, cluster: Cluster
) -> dict[str, Placement]:
    """A job whose GPU count is unchanged but whose servers changed (a restart that buys it
    nothing) takes its servers back when the jobs now on them restart anyway — they did not
    hold those GPUs last round — and each of them can move its GPUs there to the GPUs so
    freed (or idle ones) without spanning more servers or switches. Placement is ours, not
    the paper's: FaPES §5.3 keeps a job's servers only within its own plan (Fig. 9).

    The servers' use and the jobs on each server are kept up to date as jobs move, so a
    job's attempt costs the servers and jobs it touches, not the whole allocation."""
    out = dict(allocation)
    occupancy = _Occupancy.of(out, cluster)
    for name in sorted(out):
        old, new = current.get(name, ()), out[name]
        if not old or len(old) != len(new) or Counter(old) == Counter(new):
            continue
        trial = _restore_trial(name, tuple(sorted(old)), out, current, occupancy)
        if trial is not None:
            for job, placement in trial.items():
                occupancy.move(job, out[job], placement)
                out[job] = placement
    return out


@dataclass
class _Occupancy:
    """The GPUs used on every server and the jobs on it, kept up to date as jobs move."""

    cap: npt.NDArray[np.int64]
    switch: npt.NDArray[np.int64]
    used: npt.NDArray[np.int64]
    on: list[set[str]]

    @classmethod
    def of(cls, allocation: dict[str, Placement], cluster: Cluster) -> _Occupancy:
        cap = np.array(cluster.capacity(), dtype=np.int64)
        switch = np.array([s.switch for s in cluster.servers])
        occupancy = cls(cap, switch, np.zeros(len(cap), dtype=np.int64), [set() for _ in cap])
        for job, placement in allocation.items():
            occupancy.move(job, (), placement)
        return occupancy

    def move(self, job: str, old: Placement, new: Placement) -> None:
        for sid, count in Counter(old).items():
            self.used[sid] -= count
            self.on[sid].discard(job)
        for sid, count in Counter(new).items():
            self.used[sid] += count
            self.on[sid].add(job)

    def spans(self, placement: Placement) -> tuple[int, int]:
        """The servers and switches ``placement`` spans."""
        servers = set(placement)
        return len(servers), len({int(self.switch[s]) for s in servers})


def _restore_trial(
    name: str,
    old: Placement,
    out: dict[str, Placement],
    current: ClusterAllocation,
    occupancy: _Occupancy,
) -> dict[str, Placement] | None:
    """The placements that change if job ``name`` takes back its ``old`` servers: the jobs
    it evicts refilled elsewhere; None when one cannot be without spreading further."""
    trial: dict[str, Placement] = {name: old}
    use = occupancy.used.copy()
    for sid, count in Counter(out[name]).items():
        use[sid] -= count
    for sid, count in Counter(old).items():
        use[sid] += count
    if not _evict(name, trial, out, current, occupancy, use):
        return None
    free = occupancy.cap - use
    for other in sorted(trial):
        missing = len(out[other]) - len(trial[other])
        if other == name or missing <= 0:
            continue
        placed, missing = _refill(trial[other], missing, free)
        (servers, switches) = occupancy.spans(placed)
        (servers0, switches0) = occupancy.spans(out[other])
        if missing > 0 or servers > servers0 or switches > switches0:
            return None
        trial[other] = placed
    return trial


def _evict(
    name: str,
    trial: dict[str, Placement],
    out: dict[str, Placement],
    current: ClusterAllocation,
    occupancy: _Occupancy,
    use: npt.NDArray[np.int64],
) -> bool:
    """Take GPUs on the servers ``name`` over-fills from the jobs there whose placement
    changes this round anyway (into ``trial`` and ``use``); False when that is not enough."""
    over = {
        int(sid): int(use[sid] - occupancy.cap[sid]) for sid in np.flatnonzero(use > occupancy.cap)
    }
    for sid, excess in sorted(over.items()):
        for other in sorted(occupancy.on[sid]):
            if excess <= 0:
                break
            mine = Counter(trial.get(other, out[other]))
            if other == name or not mine[sid]:
                continue
            if Counter(current.get(other, ())) == mine:
                continue  # it keeps its placement: not ours to move
            take = min(mine[sid], excess)
            mine[sid] -= take
            excess -= take
            trial[other] = tuple(sorted(mine.elements()))
            use[sid] -= take
        if excess > 0:
            return False
    return True


def _refill(
    placement: Placement, missing: int, free: npt.NDArray[np.int64]
) -> tuple[Placement, int]:
    """``placement`` grown by ``missing`` GPUs taken from ``free``: on the servers it already
    uses, then on the fullest-fitting free server; also the GPUs still missing."""
    mine = Counter(placement)
    for sid in sorted(mine, key=lambda s: (-int(free[s]), s)):
        add = int(min(free[sid], missing))
        mine[sid] += add
        free[sid] -= add
        missing -= add
    while missing > 0 and int(free.sum()) > 0:
        fits = np.flatnonzero(free >= missing)
        sid = int(fits[np.argmin(free[fits])]) if len(fits) else int(free.argmax())
        add = int(min(free[sid], missing))
        mine[sid] += add
        free[sid] -= add
        missing -= add
    return tuple(sorted(mine.elements())), missing
