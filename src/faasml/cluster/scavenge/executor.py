"""Executors: what carries out the allocator's node map on jobs.

One small contract (:class:`Executor`) with two sides: the simulated executor here (jobs as
progress equations) and a real one (processes on a Ray cluster) behind the same calls, so
the policies and the event loop do not know which runs.

Rules of the simulated executor (the same a real elastic job follows):
- a job's node set changes only by :meth:`apply` (a rescale: checkpoint, restart on the new
  nodes) or :meth:`preempt` (nodes taken with no notice);
- a rescale pauses the job for its ``scale_up_s`` if any node is added, else ``scale_down_s``;
  going to no nodes stops it after a checkpoint (no pause, nothing lost);
- a running job checkpoints every ``checkpoint_s`` seconds of training and at each rescale;
  a preempted job falls back to its last checkpoint (the work since is lost) and pays the
  rescale cost of the restart that follows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from faasml.cluster.scavenge._records import ScavengeJob
from faasml.cluster.scavenge.curves import Curve, PiecewiseCurve


class Executor(Protocol):
    """Carries out node maps. ``apply`` gives each named job exactly the nodes named (a job
    not named keeps what it has); ``preempt`` takes nodes back with no notice and returns
    the jobs hit; ``samples`` is a job's useful progress now."""

    def apply(self, now: float, assignment: Mapping[str, tuple[str, ...]]) -> list[str]: ...

    def preempt(self, now: float, nodes: Iterable[str]) -> list[str]: ...

    def samples(self, job: str, now: float) -> float: ...


@dataclass
class SimJob:
    """A simulated job's state: a segment of constant rate since its last (re)start."""

    spec: ScavengeJob
    checkpoint_s: float
    truth: Curve
    nodes: tuple[str, ...] = ()
    base: float = 0.0  # samples at the segment's start (checkpointed)
    active_from: float = 0.0  # end of the segment's rescale pause
    rate: float = 0.0  # samples/s in this segment
    before: tuple[str, ...] | None = None  # nodes held before a preemption, until re-applied
    rescales: int = 0
    preemptions: int = 0
    lost: float = 0.0
    paused_node_s: float = 0.0
    last_interrupt_s: float = 0.0
    finished_s: float | None = None
    history: list[tuple[float, int]] = field(default_factory=list)

    def progress(self, now: float) -> float:
        return min(
            self.base + self.rate * max(0.0, now - self.active_from), self.spec.total_samples
        )

    def checkpointed(self, now: float) -> float:
        if self.rate <= 0 or now < self.active_from + self.checkpoint_s:
            return self.base
        periods = math.floor((now - self.active_from) / self.checkpoint_s)
        return min(self.base + self.rate * periods * self.checkpoint_s, self.spec.total_samples)

    def finish_time(self) -> float | None:
        if self.finished_s is not None or self.rate <= 0:
            return None
        return self.active_from + (self.spec.total_samples - self.base) / self.rate


class SimExecutor:
    """The simulated executor: jobs progress at their true measured throughput."""

    def __init__(self, default_checkpoint_s: float = 60.0) -> None:
        self.jobs: dict[str, SimJob] = {}
        self.default_checkpoint_s = default_checkpoint_s
        self._owner: dict[str, str] = {}

    def add(self, spec: ScavengeJob) -> SimJob:
        every = spec.checkpoint_s if spec.checkpoint_s is not None else self.default_checkpoint_s
        truth = PiecewiseCurve(tuple(map(float, spec.nodes)), spec.samples_per_s)
        job = SimJob(spec, every, truth)
        self.jobs[spec.job] = job
        return job

    def _restart(self, job: SimJob, now: float, nodes: tuple[str, ...], pause: float) -> None:
        job.nodes = nodes
        job.active_from = now + pause
        job.rate = float(job.truth(len(nodes))) if nodes else 0.0
        job.paused_node_s += pause * len(nodes)
        job.history.append((now, len(nodes)))

    def apply(self, now: float, assignment: Mapping[str, tuple[str, ...]]) -> list[str]:
        """Rescale the named jobs to their nodes; returns the jobs whose nodes changed."""
        changed = []
        for name, nodes in assignment.items():
            job = self.jobs[name]
            old = job.before if job.before is not None else job.nodes
            if set(nodes) == set(old) and job.before is None:
                continue
            job.base = job.progress(now)  # a rescale checkpoints first
            added = bool(set(nodes) - set(old))
            pause = 0.0 if not nodes else job.spec.scale_up_s if added else job.spec.scale_down_s
            for node in job.nodes:
                # Only if still this job's: a node moving to a job named earlier in this
                # same assignment is already that job's.
                if self._owner.get(node) == name:
                    del self._owner[node]
            for node in nodes:
                self._owner[node] = name
            if set(nodes) != set(old):
                job.rescales += 1
                job.last_interrupt_s = now
            job.before = None
            self._restart(job, now, tuple(nodes), pause)
            changed.append(name)
        return changed

    def preempt(self, now: float, nodes: Iterable[str]) -> list[str]:
        """Take ``nodes`` back: each job on them falls back to its last checkpoint and stops
        until :meth:`apply` restarts it."""
        hit: dict[str, set[str]] = {}
        for node in nodes:
            owner = self._owner.pop(node, None)
            if owner is not None:
                hit.setdefault(owner, set()).add(node)
        for name, taken in hit.items():
            job = self.jobs[name]
            saved = job.checkpointed(now)
            job.lost += job.progress(now) - saved
            job.preemptions += 1
            job.last_interrupt_s = now
            if job.before is None:
                job.before = job.nodes
            job.base = saved
            job.nodes = tuple(n for n in job.nodes if n not in taken)
            job.rate = 0.0
            job.active_from = now
        return sorted(hit)

    def samples(self, job: str, now: float) -> float:
        return self.jobs[job].progress(now)

    def finish(self, name: str, now: float) -> tuple[str, ...]:
        """Mark ``name`` finished; returns the nodes it frees."""
        job = self.jobs[name]
        job.base = job.spec.total_samples
        job.rate = 0.0
        job.finished_s = now
        freed = job.nodes
        for node in freed:
            self._owner.pop(node, None)
        job.nodes = ()
        job.history.append((now, 0))
        return freed
