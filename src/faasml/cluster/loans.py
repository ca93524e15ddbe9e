"""FaPES-Manager (§3.3–§3.4): two virtual clusters over one pool of servers, loans and reclaims.

Every round, inference is served first (SLO first, §3.3): each service gets the workers its
load over the coming round needs (``InferenceService.workers_for``), all ``min_scale`` first
in priority (file) order when GPUs are short, then up to what each needs. The inference
virtual cluster (VC) then needs ``ceil(GPUs / GPUs per server)`` servers; servers are moved
whole (§3.3: "both events take one server as the moving unit").

- A *loan* moves idle inference servers to the training VC; a *reclaim* moves ``N_r``
  servers back, preempting the training jobs on them (checkpoint and restart, Table 2).
- Which servers to reclaim (§3.4): the *reclaim cost* of a server is the number of jobs
  running on it, its *reclaim gain* the number of servers freed (itself included) when every
  job on it is preempted. ``iterative_reclaim`` is §3.4's selection: repeatedly take the
  server of largest gain not above the servers still wanted (ties: least cost, then lowest
  id), preempt its jobs, update the others. ``exact_reclaim`` minimises the number of jobs
  preempted by search over sets of jobs (used when few jobs are involved, so small cases are
  optimal); ``select_reclaim`` picks between them.

Loaning strategies (FaPES §7.1): ``dedicated`` reserves ``N_r^max`` servers (the most the
services need at once) for inference and never lends them; ``one-way`` lends idle servers of
that reserve to training and takes them back in the order lent (idle ones first), blind to
what runs on them; ``one-way-blind`` is the same without taking idle ones first (§7.1's
one-way as printed, which says nothing of idle servers; a diagnostic); ``fapes`` lends any
idle inference server and reclaims any training server, chosen by reclaim cost and gain
(two-way).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from faasml.cluster.inference import InferenceService
from faasml.cluster.plain import Cluster, Placement
from faasml.exceptions import ConfigError

LOANING = ("dedicated", "one-way", "fapes", "one-way-blind")
ONE_WAY = ("one-way", "one-way-blind")
EXACT_MAX_JOBS = 14
"""``select_reclaim`` searches exactly when at most this many jobs run on the candidates."""


def check_loaning(mode: str) -> str:
    if mode not in LOANING:
        raise ConfigError(
            f"the value of loaning is {mode!r}, but must be one of: {', '.join(LOANING)}"
        )
    return mode


def serve_first(
    services: Sequence[InferenceService], rates: Sequence[float], gpus: int
) -> list[int]:
    """GPUs of each service for ``rates`` within ``gpus`` (FaPES §3.3): everything each
    needs if it fits; else every ``min_scale`` in priority order, then up to the need."""
    need = [s.workers_for(r) for s, r in zip(services, rates, strict=True)]
    if sum(need) <= gpus:
        return need
    out, left = [], gpus
    for s, n in zip(services, need, strict=True):
        take = min(s.min_scale, n, left)
        out.append(take)
        left -= take
    for i, n in enumerate(need):
        take = min(n - out[i], left)
        out[i] += take
        left -= take
    return out


def reserve_servers(
    services: Sequence[InferenceService], round_s: float, gpus_per_server: int
) -> int:
    """``N_r^max`` (FaPES §7.1): the most servers the services need at once, round by round
    over their traces (each round provisioned for its peak load)."""
    # Only rounds where some rate changes can hold a new peak (in the others every rate
    # is the one it had at the last change), so those rounds are enough.
    points = np.concatenate([[0.0], *(s.rate.times_s for s in services)])
    most = 0
    for k in np.unique(np.floor(points / round_s)):
        t0 = float(k) * round_s
        rates = [s.rate.peak_between(t0, t0 + round_s) for s in services]
        most = max(most, sum(s.workers_for(r) for s, r in zip(services, rates, strict=True)))
    return math.ceil(most / gpus_per_server)


def jobs_by_server(allocation: Mapping[str, Placement]) -> dict[int, set[str]]:
    on: dict[int, set[str]] = {}
    for name, placement in allocation.items():
        for sid in placement:
            on.setdefault(sid, set()).add(name)
    return on


def reclaim_cost(chosen: Sequence[int], allocation: Mapping[str, Placement]) -> tuple[int, int]:
    """Jobs preempted and the GPUs they held, if the servers ``chosen`` are reclaimed."""
    on = jobs_by_server(allocation)
    hit = set().union(*(on.get(s, set()) for s in chosen)) if chosen else set()
    return len(hit), sum(len(allocation[n]) for n in hit)


def iterative_reclaim(
    candidates: Sequence[int], allocation: Mapping[str, Placement], n: int
) -> tuple[int, ...]:
    """FaPES §3.4's iterative selection of ``n`` servers among ``candidates``.

    Idle servers (cost 0) are taken first (our choice: they preempt nothing). Then, while
    servers are wanted: (1) take the server of largest reclaim gain not above the number
    still wanted (ties: least reclaim cost, then lowest id; if every gain is above it, the
    smallest gain), with the servers its jobs alone occupy, which come free at no extra cost;
    (2) update the cost and gain of the others, the preempted jobs gone."""
    on = {s: set(v) for s, v in jobs_by_server(allocation).items() if s in set(candidates)}
    idle = sorted(s for s in candidates if not on.get(s))
    chosen = idle[:n]
    left = sorted(s for s in candidates if on.get(s))
    while len(chosen) < n and left:
        want = n - len(chosen)
        best: tuple[int, int, int] | None = None
        for s in left:
            gain = sum(1 for t in left if on[t] <= on[s])
            key = (gain if gain <= want else -gain, -len(on[s]), -s)
            if best is None or key > best:
                best = key
        assert best is not None
        pick = -best[2]
        gone = set(on[pick])
        freed = sorted((t for t in left if on[t] <= gone), key=lambda t: (t != pick, t))
        for t in freed[:want]:
            chosen.append(t)
            left.remove(t)
        for t in list(left):
            on[t] -= gone
            if not on[t] and len(chosen) < n:  # freed by the preemption: no extra cost
                chosen.append(t)
                left.remove(t)
    return tuple(sorted(chosen))


def exact_reclaim(
    candidates: Sequence[int], allocation: Mapping[str, Placement], n: int
) -> tuple[int, ...] | None:
    """``n`` servers among ``candidates`` whose reclaim preempts the fewest jobs (ties: the
    fewest GPUs of preempted jobs, then the lowest server ids); None if more than
    ``EXACT_MAX_JOBS`` jobs run on the candidates."""
    cands = sorted(candidates)
    on = {s: frozenset(v) for s, v in jobs_by_server(allocation).items() if s in set(cands)}
    names = sorted(set().union(*on.values())) if on else []
    if len(names) > EXACT_MAX_JOBS:
        return None
    size = {name: len(allocation[name]) for name in names}
    n = min(n, len(cands))
    for k in range(len(names) + 1):
        best: tuple[int, tuple[int, ...]] | None = None
        for hit in itertools.combinations(names, k):
            gone = set(hit)
            free = [s for s in cands if on.get(s, frozenset()) <= gone]
            if len(free) < n:
                continue
            # Keep only sets whose every job is needed (else a smaller k already won).
            pick = _fewest_gpus(free, on, size, n)
            cost = sum(size[j] for j in set().union(*(on.get(s, frozenset()) for s in pick)))
            if best is None or (cost, pick) < best:
                best = (cost, pick)
        if best is not None:
            return best[1]
    return tuple(cands[:n])


def _fewest_gpus(
    free: list[int], on: Mapping[int, frozenset[str]], size: Mapping[str, int], n: int
) -> tuple[int, ...]:
    """``n`` of the freeable servers: idle ones first, then those whose jobs are smallest."""
    ranked = sorted(free, key=lambda s: (sum(size[j] for j in on.get(s, frozenset())), s))
    return tuple(sorted(ranked[:n]))


def select_reclaim(
    candidates: Sequence[int], allocation: Mapping[str, Placement], n: int
) -> tuple[int, ...]:
    """Exact when few jobs are involved, else §3.4's iterative selection."""
    exact = exact_reclaim(candidates, allocation, n)
    return exact if exact is not None else iterative_reclaim(candidates, allocation, n)


@dataclass(frozen=True)
class Rebalance:
    """One round's FaPES-Manager events."""

    inference: frozenset[int]
    """Servers in the inference VC after the round's events."""
    loaned: tuple[int, ...] = ()
    reclaimed: tuple[int, ...] = ()
    preempted: tuple[str, ...] = ()
    """Training jobs that ran on a reclaimed server."""


class LoanManager:
    """FaPES-Manager: keeps the server labels (which VC each server is in) and moves them."""

    def __init__(self, cluster: Cluster, reserve: int, mode: str) -> None:
        check_loaning(mode)
        self.cluster = cluster
        self.mode = mode
        n = len(cluster.servers)
        self.reserve = min(max(reserve, 0), n)
        # The inference VC's home servers: the last ones (the training VC keeps 0, 1, ...).
        self.home = tuple(range(n - self.reserve, n))
        self.inference: set[int] = set(self.home)
        self._lent: list[int] = []  # one-way: home servers lent, in lending order

    @property
    def gpus_per_server(self) -> int:
        return self.cluster.gpus_per_server

    def max_inference_gpus(self) -> int:
        """GPUs inference may use: its reserve, or the whole pool with two-way loans."""
        if self.mode == "fapes":
            return self.cluster.total_gpus
        return sum(self.cluster.servers[s].gpus for s in self.home)

    def rebalance(self, gpus: int, allocation: Mapping[str, Placement]) -> Rebalance:
        """Resize the inference VC to hold ``gpus`` inference GPUs, given the training
        allocation in force; returns the loans, reclaims and the jobs preempted."""
        want = min(math.ceil(gpus / self.gpus_per_server), len(self.cluster.servers))
        if self.mode == "dedicated":
            return Rebalance(frozenset(self.inference))
        have = len(self.inference)
        if want < have:
            spare = sorted(self.inference, reverse=True)[: have - want]
            for s in spare:
                self.inference.discard(s)
            if self.mode in ONE_WAY:
                self._lent.extend(sorted(spare))
            return Rebalance(frozenset(self.inference), loaned=tuple(sorted(spare)))
        if want == have:
            return Rebalance(frozenset(self.inference))
        n = want - have
        training = [s for s in range(len(self.cluster.servers)) if s not in self.inference]
        if self.mode in ONE_WAY:
            on = jobs_by_server(allocation)
            order = list(self._lent)
            if self.mode == "one-way":  # idle ones first
                order.sort(key=lambda s: (bool(on.get(s)), self._lent.index(s)))
            chosen = tuple(sorted(order[:n]))
            for s in chosen:
                self._lent.remove(s)
        else:
            loanable = [s for s in training if self.cluster.servers[s].loanable]
            chosen = select_reclaim(loanable, allocation, n)
        self.inference.update(chosen)
        hit = set().union(*(jobs_by_server(allocation).get(s, set()) for s in chosen))
        return Rebalance(frozenset(self.inference), reclaimed=chosen, preempted=tuple(sorted(hit)))
