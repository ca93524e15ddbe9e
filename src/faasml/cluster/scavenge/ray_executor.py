"""Real execution: elastic data-parallel PyTorch jobs on the nodes of a Ray cluster.

:class:`RayExecutor` carries out the allocator's node map (the :class:`~.executor.Executor`
contract) on real processes: each job runs one worker actor per node it holds (pinned by a
per-node custom resource), every worker holds a replica of the model, computes the gradient
of its shard's minibatch, and applies the average of all workers' gradients (synchronous
data parallelism, a fixed per-node minibatch as FreeTrain and MalleTrain assume). Rank 0
checkpoints the replica (parameters, optimiser, step, samples) every few steps and at each
rescale. A rescale stops the workers and starts new ones on the new nodes, which load the
checkpoint; a node taken away kills its worker with no notice, and the job resumes from its
last checkpoint, losing only the steps since.

:func:`run_on_ray` replays a (scaled-down) idle-node trace on a Ray cluster whose nodes the
caller adds and removes (:class:`NodeSource`), with the same policies, JPA and node mapping as
the simulator. Imports Ray and PyTorch only when used (extras ``ray`` and ``torch``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from faasml.cluster.scavenge._records import IdleTrace, PoolChange, ScavengeJob
from faasml.cluster.scavenge.allocator import map_to_nodes
from faasml.cluster.scavenge.policies import JobView, ScavengePolicy
from faasml.cluster.scavenge.ray_elastic import (
    NODE_RESOURCE,
    ElasticTask,
    RayExecutor,
    RealJob,
    node_resource,
)
from faasml.exceptions import ConfigError

__all__ = [
    "NODE_RESOURCE",
    "ElasticTask",
    "NodeSource",
    "RayClusterNodes",
    "RayExecutor",
    "RealJob",
    "RealRunResult",
    "node_resource",
    "run_on_ray",
]


class NodeSource(Protocol):
    """Where idle nodes come from: the main scheduler lends ``add`` and takes back
    ``remove`` (no notice to the jobs on it)."""

    def add(self, node: str) -> None: ...

    def remove(self, node: str) -> None: ...


@dataclass(frozen=True)
class _Window:
    """A job's measurement at ``nodes`` since its count last changed: its busy seconds,
    samples and trained steps when it began."""

    busy_s: float
    samples: float
    steps: int
    nodes: int

    @classmethod
    def start(cls, job: RealJob, nodes: int) -> _Window:
        return cls(job.busy_s, job.samples, len(job.losses), nodes)

    def done(self, job: RealJob, measure_s: float, measure_steps: int) -> bool:
        return (
            job.busy_s - self.busy_s >= measure_s
            and len(job.losses) - self.steps >= measure_steps
            and job.busy_s > self.busy_s
        )

    def rate(self, job: RealJob) -> float:
        """Samples per second of the job's own step time over the window."""
        return (job.samples - self.samples) / (job.busy_s - self.busy_s)


@dataclass
class RealRunResult:
    """What a real run did, per job: samples, steps, rescales, preemptions, losses."""

    jobs: dict[str, RealJob]
    wall_s: float
    allocations: int


def run_on_ray(
    trace: IdleTrace,
    jobs: Sequence[ScavengeJob],
    policy: ScavengePolicy,
    source: NodeSource,
    executor: RayExecutor,
    *,
    tasks: Mapping[str, ElasticTask] | None = None,
    time_scale: float = 1.0,
    max_running: int = 10,
    measure_s: float = 1.0,
    measure_steps: int = 3,
    timeout_s: float = 300.0,
    clock: Callable[[], float] = time.monotonic,
) -> RealRunResult:
    """Replay ``trace`` on real nodes until every job has trained its ``total_samples``
    (or ``timeout_s`` of wall time): pool changes go to ``source`` and the executor, every
    change of pool or jobs runs ``policy`` (with the JPA's inverse-order profiling where the
    policy asks for it), and jobs train in between.

    The trace's time is ``clock()`` (wall seconds by default) × ``time_scale``; a test may pass
    a clock that advances with training progress, so that events land at the same point of
    the jobs' progress on any machine. A measurement (the JPA's at each count, and the least
    the Job Monitor turns into a record) spans at least ``measure_s`` seconds of the job's own
    step time *and* at least ``measure_steps`` steps: with ``measure_s`` 0 it is a fixed number
    of steps, the same on a fast machine and a slow one."""
    if time_scale <= 0:
        raise ConfigError(f"time_scale is {time_scale}, but must be > 0")
    if measure_s < 0 or measure_steps < 1:
        raise ConfigError(
            f"measure_s is {measure_s} and measure_steps {measure_steps}, "
            "but they must be >= 0 and >= 1"
        )
    origin = clock()
    wall = time.monotonic()
    replay = _Replay(
        policy,
        source,
        executor,
        dict(tasks or {}),
        max_running,
        measure_s,
        measure_steps,
        list(trace.changes),
        sorted(jobs, key=lambda j: j.submit_s),
    )

    def now() -> float:
        return (clock() - origin) * time_scale

    while True:
        t = now()
        dirty, replay.force = replay.force, False
        dirty |= replay.pool_changes(t)
        dirty |= replay.arrivals_until(t)
        dirty |= replay.finished(t)
        dirty |= replay.profiling_steps(t)
        if not replay.running and not replay.queue and not replay.arrivals:
            break
        if time.monotonic() - wall > timeout_s:
            break
        if dirty:
            replay.allocate(t, now)
        replay.train()
    executor.shutdown()
    return RealRunResult(dict(executor.jobs), time.monotonic() - wall, replay.allocations)


@dataclass
class _Replay:
    """The state of :func:`run_on_ray` between rounds: the pool, the queued and running
    jobs, the JPA's profiling and each job's measurement window."""

    policy: ScavengePolicy
    source: NodeSource
    executor: RayExecutor
    task_of: dict[str, ElasticTask]
    max_running: int
    measure_s: float
    measure_steps: int
    changes: list[PoolChange]
    arrivals: list[ScavengeJob]
    pool: set[str] = field(default_factory=set)
    queue: list[ScavengeJob] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    profiling: dict[str, tuple[tuple[int, ...], int, float]] = field(default_factory=dict)
    """Job → its profiling order, the step of it, when the step began."""
    window: dict[str, _Window] = field(default_factory=dict)
    """Job → its measurement since the last change of its count."""
    allocations: int = 0
    force: bool = False
    """A worker died before the trace took its node: run the policy next round."""

    def pool_changes(self, t: float) -> bool:
        """Lend and take back the nodes the trace changes by ``t``; whether any changed."""
        dirty = False
        while self.changes and self.changes[0].time_s <= t:
            change = self.changes.pop(0)
            for node in sorted(change.removed):
                self.source.remove(node)
            self.pool -= change.removed
            for name in self.executor.preempt(t, change.removed):
                self.profiling.pop(name, None)
                self.window.pop(name, None)
            for node in sorted(change.added):
                self.source.add(node)
            self.pool |= change.added
            dirty = True
        return dirty

    def arrivals_until(self, t: float) -> bool:
        """Queue the jobs submitted by ``t``; whether any was."""
        dirty = False
        while self.arrivals and self.arrivals[0].submit_s <= t:
            spec = self.arrivals.pop(0)
            self.queue.append(spec)
            self.executor.add(spec, self.task_of.get(spec.job, ElasticTask()))
            dirty = True
        return dirty

    def finished(self, t: float) -> bool:
        """Finish the running jobs that trained all their samples; whether any did."""
        dirty = False
        for name in list(self.running):
            job = self.executor.jobs[name]
            if job.samples >= job.spec.total_samples:
                self.executor.finish(name, t)
                self.running.remove(name)
                self.profiling.pop(name, None)
                dirty = True
        return dirty

    def profiling_steps(self, t: float) -> bool:
        """Hand the policy each JPA measurement that is done and move the job to its next
        count, or end its profiling; whether any measurement was done."""
        dirty = False
        for name, (order, step, _) in list(self.profiling.items()):
            job = self.executor.jobs[name]
            window = self.window.get(name)
            if window is not None and window.done(job, self.measure_s, self.measure_steps):
                self.policy.observe(name, window.nodes, window.rate(job))
                if step + 1 < len(order) and self.policy.profile_more(name):
                    self.profiling[name] = (order, step + 1, t)
                    nodes = tuple(sorted(job.nodes)[: order[step + 1]])
                    self.executor.apply(t, {name: nodes})
                    self.window[name] = _Window.start(job, order[step + 1])
                else:
                    self.profiling.pop(name)
                dirty = True
        return dirty

    def allocate(self, t: float, now: Callable[[], float]) -> None:
        """Admit queued jobs, record the Job Monitor's rates, run the policy and map its
        counts onto nodes; start the profiling it asks for."""
        jobs = self.executor.jobs
        while self.queue and len(self.running) < self.max_running:
            self.running.append(self.queue.pop(0).job)
        views = [
            JobView(
                jobs[n].spec,
                len(jobs[n].nodes),
                n in self.profiling,
                jobs[n].history[-1][0] if jobs[n].history else 0.0,
            )
            for n in self.running
        ]
        for name in self.running:  # Job Monitor: the rate at the current count
            if name not in self.profiling and name in self.window:
                measured = self.window[name]
                done = measured.done(jobs[name], self.measure_s, self.measure_steps)
                if done and measured.nodes > 0:
                    self.policy.observe(name, measured.nodes, measured.rate(jobs[name]))
        decision = self.policy.allocate(t, len(self.pool), views)
        self.allocations += 1
        current = {n: jobs[n].nodes for n in self.running}
        used = {node for nodes in current.values() for node in nodes}
        assignment = map_to_nodes(current, decision.counts, self.pool - used)
        for name in self.executor.apply(t, assignment):
            self.window[name] = _Window.start(jobs[name], len(assignment[name]))
        for name, order in decision.profile.items():
            self.profiling[name] = (order, 0, now())

    def train(self) -> None:
        """One round of training; a job whose worker died before the trace took its node
        waits for the pool change (``force``: the policy runs next round)."""
        before = {n: self.executor.jobs[n].samples for n in self.running}
        self.executor.train_round()
        for name in self.running:
            job = self.executor.jobs[name]
            if job.stale and not job.finished:
                self.window.pop(name, None)
                self.profiling.pop(name, None)
                self.force = True
        if not any(self.executor.jobs[n].samples > before[n] for n in self.running):
            time.sleep(0.05)


class RayClusterNodes:
    """A :class:`NodeSource` on ``ray.cluster_utils.Cluster``: each idle node is a Ray node
    with one CPU and the node's custom resource; removing it kills what runs there."""

    def __init__(self, cluster: Any, *, num_cpus: int = 1) -> None:
        self.cluster = cluster
        self.num_cpus = num_cpus
        self._handles: dict[str, Any] = {}

    def add(self, node: str) -> None:
        self._handles[node] = self.cluster.add_node(
            num_cpus=self.num_cpus, resources={node_resource(node): 1}
        )

    def remove(self, node: str) -> None:
        handle = self._handles.pop(node, None)
        if handle is not None:
            self.cluster.remove_node(handle)
