"""Plain records of cluster mode: servers under switches, jobs, layouts, schedule plans.

A leaf module (it imports nothing else from cluster mode), so the trace loaders, the goodput
model and the policies can all depend on it without an import circle.

A *placement* is a sorted tuple of server ids, one entry per GPU (``(3, 3, 7)``: two GPUs on
server 3, one on server 7), after the Pollux artifact. An *allocation* maps job names to
placements; a job absent from it holds no GPU. A server has a ``pool`` (``"training"`` or
``"inference"``) and a ``loanable`` flag: servers loaned between the inference and training
virtual clusters (FaPES §3.4, :mod:`faasml.cluster.loans`) are the same records, and a
policy only ever sees the servers it is given.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from faasml.exceptions import ConfigError

TABLE2_RESTART_S = (1580 + 402 + 140 + 3558) / 1000.0
"""Overhead of every (re)start of a job, FaPES Table 2: checkpoint 1580 ms + upload 402 ms
+ download 140 ms + container creation 3558 ms = 5.68 s."""

Placement = tuple[int, ...]
"""Server id of every GPU a job holds, sorted."""

ClusterAllocation = Mapping[str, Placement]
"""Job name -> placement; a job that is absent holds nothing."""


@dataclass(frozen=True)
class Server:
    """A GPU server under a switch (FaPES §3, Fig. 7: servers under ToR switches)."""

    id: int
    gpus: int
    switch: int = 0
    pool: str = "training"
    """Virtual cluster the server is in now (FaPES §3.4 loans move servers between pools)."""
    loanable: bool = True
    """Whether the server may be loaned out or reclaimed (for a later issue)."""

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ConfigError(
                f"server {self.id}: the value of gpus is {self.gpus}, but must be >= 1"
            )


@dataclass(frozen=True)
class Cluster:
    """The servers a policy may use, with their topology."""

    servers: tuple[Server, ...]

    def __post_init__(self) -> None:
        if not self.servers:
            raise ConfigError("a cluster needs at least one server")
        ids = [s.id for s in self.servers]
        if ids != list(range(len(ids))):
            raise ConfigError("server ids must be 0, 1, ..., n-1 in order")

    @classmethod
    def uniform(
        cls, servers: int, gpus_per_server: int, servers_per_switch: int | None = None
    ) -> Cluster:
        """``servers`` identical servers; ``servers_per_switch`` of them under each switch
        (None: all under one switch)."""
        if servers < 1:
            raise ConfigError(f"the value of servers is {servers}, but must be >= 1")
        if gpus_per_server < 1:
            raise ConfigError(
                f"the value of gpus_per_server is {gpus_per_server}, but must be >= 1"
            )
        per = servers if servers_per_switch is None else servers_per_switch
        if per < 1:
            raise ConfigError(
                f"the value of servers_per_switch is {servers_per_switch}, but must be >= 1"
            )
        return cls(tuple(Server(i, gpus_per_server, i // per) for i in range(servers)))

    @cached_property
    def total_gpus(self) -> int:
        return sum(s.gpus for s in self.servers)

    @cached_property
    def gpus_per_server(self) -> int:
        """The largest server's GPU count (used to pack estimates)."""
        return max(s.gpus for s in self.servers)

    @cached_property
    def servers_per_switch(self) -> int:
        counts = Counter(s.switch for s in self.servers)
        return max(counts.values())

    def capacity(self) -> list[int]:
        return [s.gpus for s in self.servers]

    def free(self, allocation: ClusterAllocation) -> list[int]:
        """Free GPUs per server given an allocation; raises if a server is oversubscribed."""
        free = self.capacity()
        for name, placement in allocation.items():
            for sid in placement:
                free[sid] -= 1
                if free[sid] < 0:
                    raise ConfigError(f"server {sid} is oversubscribed (job {name})")
        return free

    def layout(self, placement: Placement) -> Layout:
        """GPUs per server used and switches spanned by a placement."""
        counts = Counter(placement)
        switches = len({self.servers[sid].switch for sid in counts})
        return Layout(tuple(sorted(counts.values(), reverse=True)), switches)

    def packed_layout(self, gpus: int) -> Layout:
        """The layout of ``gpus`` GPUs packed on the fewest servers and switches."""
        return packed_layout(gpus, self.gpus_per_server, self.servers_per_switch)


@dataclass(frozen=True)
class Layout:
    """What the performance model needs of a placement: GPUs per server (descending) and the
    number of switches spanned (the topology-aware communication term)."""

    counts: tuple[int, ...]
    switches: int = 1

    @property
    def gpus(self) -> int:
        return sum(self.counts)

    @property
    def nodes(self) -> int:
        return len(self.counts)


def packed_layout(gpus: int, gpus_per_server: int, servers_per_switch: int) -> Layout:
    """``gpus`` GPUs packed on full servers first, the rest on one more server."""
    if gpus <= 0:
        return Layout((), 0)
    full, rest = divmod(gpus, gpus_per_server)
    counts = (gpus_per_server,) * full + ((rest,) if rest else ())
    return Layout(counts, math.ceil(len(counts) / max(servers_per_switch, 1)))


@dataclass(frozen=True)
class Job:
    """A training job as submitted (Pollux artifact workload row plus optional bounds).

    ``gpus`` and ``batch_size`` are what the user asked for (used as-is by non-adaptive
    policies); ``epochs`` is the amount of work (None: the application's default length).
    """

    name: str
    application: str
    arrival_s: float
    gpus: int
    batch_size: int
    min_gpus: int = 1
    max_gpus: int | None = None
    min_batch: int | None = None
    max_batch: int | None = None
    epochs: int | None = None
    deadline_s: float | None = None
    """Absolute time by which the job should finish (ElasticFlow's deadline), or None."""
    kind: str = "training"
    """``training`` now; ``inference`` services come with server loans (a later issue)."""

    def __post_init__(self) -> None:
        where = f"job {self.name!r}"
        if self.arrival_s < 0 or not math.isfinite(self.arrival_s):
            raise ConfigError(f"{where}: the value of time is {self.arrival_s}, but must be >= 0")
        for label, value in (("num_replicas", self.gpus), ("batch_size", self.batch_size)):
            if value < 1:
                raise ConfigError(f"{where}: the value of {label} is {value}, but must be >= 1")
        if self.min_gpus < 1:
            raise ConfigError(
                f"{where}: the value of min_gpus is {self.min_gpus}, but must be >= 1"
            )
        if self.max_gpus is not None and self.max_gpus < self.min_gpus:
            raise ConfigError(
                f"{where}: the value of max_gpus is {self.max_gpus}, "
                f"but must be >= min_gpus ({self.min_gpus})"
            )
        if self.epochs is not None and self.epochs < 1:
            raise ConfigError(f"{where}: the value of epochs is {self.epochs}, but must be >= 1")
        for label, bound in (("min_batch", self.min_batch), ("max_batch", self.max_batch)):
            if bound is not None and bound < 1:
                raise ConfigError(f"{where}: the value of {label} is {bound}, but must be >= 1")
        if (
            self.min_batch is not None
            and self.max_batch is not None
            and self.max_batch < self.min_batch
        ):
            raise ConfigError(
                f"{where}: the value of max_batch is {self.max_batch}, "
                f"but must be >= min_batch ({self.min_batch})"
            )
        if self.deadline_s is not None and self.deadline_s <= self.arrival_s:
            raise ConfigError(
                f"{where}: the value of deadline is {self.deadline_s}, "
                f"but must be after its arrival ({self.arrival_s})"
            )


@dataclass(frozen=True)
class Segment:
    """Part of a FaPES schedule plan: ``placement`` from round ``start`` to ``end`` (excl.)."""

    start: int
    end: int
    placement: Placement


@dataclass(frozen=True)
class SchedulePlan:
    """A job's GPU allocation over future rounds (FaPES §5.3), kept on the board."""

    segments: tuple[Segment, ...]
    achievement: float = 1.0
    """Average planned goodput over the best goodput the model allows (FaPES §5.1)."""

    @property
    def end(self) -> int:
        return self.segments[-1].end if self.segments else 0

    def placement_at(self, round_index: int) -> Placement | None:
        for seg in self.segments:
            if seg.start <= round_index < seg.end:
                return seg.placement
        return None


@dataclass(frozen=True)
class Observation:
    """One throughput measurement a running job reports (Pollux §3.1 fits its throughput
    model to these): the layout, the batch configuration and the measured times."""

    counts: tuple[int, ...]
    """GPUs per server, descending."""
    switches: int
    atomic_bsz: int
    accum_steps: int
    step_s: float
    """Time of one step (compute + gradient synchronisation)."""
    sync_s: float
    """Gradient synchronisation part of the step."""
