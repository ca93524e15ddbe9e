"""Event-driven replay of an idle-node trace with a jobs file (MalleTrain §3.1.2, §3.2).

On faasml's discrete-event core: the Scavenger's pool changes at the trace's instants
(new nodes; nodes taken back = preemption), jobs arrive (new jobs) and finish (job
completion); each instant with any of the four events runs the policy once, whose counts
are mapped to nodes keeping each job's nodes and carried out by the executor. At most P
jobs run (FCFS queue beyond). Profiling phases of the Job Profiling Advisor are events too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from faasml.cluster.scavenge._records import EventKind, IdleTrace, ScavengeJob
from faasml.cluster.scavenge.allocator import map_to_nodes
from faasml.cluster.scavenge.executor import SimExecutor, SimJob
from faasml.cluster.scavenge.metrics import ScavengeResult
from faasml.cluster.scavenge.policies import JobView, ScavengePolicy
from faasml.exceptions import ConfigError
from faasml.sim.engine import Event, EventLoop

_POOL, _DONE, _ARRIVE, _PHASE, _ALLOCATE = 0, 1, 2, 3, 9


@dataclass(frozen=True)
class ScavengeConfig:
    """``max_running``: P, the most jobs running at once; ``end_s``: stop here (default: the
    trace's last event); ``checkpoint_s``: jobs' checkpoint interval unless their row sets
    one; ``measure_s``: how long the JPA measures at each count; ``min_record_s``: the
    shortest run at one count the Job Monitor turns into a throughput record."""

    max_running: int = 10
    end_s: float | None = None
    checkpoint_s: float = 60.0
    measure_s: float = 60.0
    min_record_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_running < 1:
            raise ConfigError(f"max running jobs is {self.max_running}, but must be >= 1")
        for name in ("checkpoint_s", "measure_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} is {getattr(self, name)}, but must be > 0")
        if self.end_s is not None and self.end_s <= 0:
            raise ConfigError(f"the end is {self.end_s} s, but must be > 0")


@dataclass
class _Profiling:
    order: tuple[int, ...]
    step: int = 0
    event: Event | None = None
    started_s: float = 0.0
    ups: int = 0
    downs: int = 0


@dataclass
class _State:
    pool: set[str] = field(default_factory=set)
    queue: list[ScavengeJob] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    arrived: int = 0
    dirty: set[EventKind] = field(default_factory=set)
    pending: Event | None = None


class ScavengeSimulator:
    """One replay of ``trace`` and ``jobs`` under ``policy``; :meth:`run` returns the result."""

    def __init__(
        self,
        trace: IdleTrace,
        jobs: Sequence[ScavengeJob],
        policy: ScavengePolicy,
        config: ScavengeConfig | None = None,
    ) -> None:
        self.trace = trace
        self.specs = list(jobs)
        self.policy = policy
        self.config = config or ScavengeConfig()
        self.end_s = self.config.end_s if self.config.end_s is not None else trace.end_s
        self.loop = EventLoop()
        self.executor = SimExecutor(self.config.checkpoint_s)
        self.state = _State()
        self.completion: dict[str, Event] = {}
        self.profiling: dict[str, _Profiling] = {}
        self.profiled_cost: dict[str, tuple[int, int, float]] = {}
        self.solve_s: list[float] = []
        self.statuses: dict[str, int] = {}
        self.timeline: list[tuple[float, int, int]] = []
        self.events: dict[str, int] = {k.value: 0 for k in EventKind}
        self._segment: dict[str, tuple[float, int]] = {}

    # -- event handlers ------------------------------------------------------------------

    def _mark(self, kind: EventKind) -> None:
        self.state.dirty.add(kind)
        if self.state.pending is None:
            self.state.pending = self.loop.at(self.loop.now, self._allocate, priority=_ALLOCATE)

    def _pool_change(self, index: int) -> None:
        change = self.trace.changes[index]
        now = self.loop.now
        if change.removed:
            self.state.pool -= change.removed
            hit = self.executor.preempt(now, change.removed)
            for name in hit:
                self._close_segment(name, now)
                self._cancel_completion(name)
                prof = self.profiling.pop(name, None)
                if prof is not None and prof.event is not None:
                    prof.event.cancel()
                    self._end_profile(name, prof, now)
            self._mark(EventKind.PREEMPTION)
        if change.added:
            self.state.pool |= change.added
            self._mark(EventKind.NEW_NODES)

    def _arrive(self, spec: ScavengeJob) -> None:
        self.state.queue.append(spec)
        self.state.arrived += 1
        self._mark(EventKind.NEW_JOBS)

    def _complete(self, name: str) -> None:
        now = self.loop.now
        self._close_segment(name, now)
        self.completion.pop(name, None)
        prof = self.profiling.pop(name, None)
        if prof is not None and prof.event is not None:
            prof.event.cancel()
            self._end_profile(name, prof, now)
        self.executor.finish(name, now)
        self.state.running.remove(name)
        self._mark(EventKind.JOB_COMPLETION)

    def _phase_done(self, name: str) -> None:
        """The JPA measured at the current count: record it, scale down to the next one."""
        now = self.loop.now
        prof = self.profiling[name]
        job = self.executor.jobs[name]
        self.policy.observe(name, len(job.nodes), job.rate)
        prof.step += 1
        prof.event = None
        if prof.step >= len(prof.order) or not self.policy.profile_more(name):
            self.profiling.pop(name)
            self._end_profile(name, prof, now)
            self._mark(EventKind.JOB_COMPLETION)  # nodes to hand out again: re-allocate
            return
        self._close_segment(name, now)
        target = prof.order[prof.step]
        nodes = tuple(sorted(job.nodes)[:target])
        self._apply({name: nodes})
        prof.downs += 1
        self._schedule_phase(name)
        self._mark(EventKind.JOB_COMPLETION)

    def _end_profile(self, name: str, prof: _Profiling, now: float) -> None:
        ups, downs, spent = self.profiled_cost.get(name, (0, 0, 0.0))
        self.profiled_cost[name] = (
            ups + prof.ups,
            downs + prof.downs,
            spent + now - prof.started_s,
        )

    # -- helpers ---------------------------------------------------------------------------

    def _cancel_completion(self, name: str) -> None:
        event = self.completion.pop(name, None)
        if event is not None:
            event.cancel()

    def _schedule_completion(self, name: str) -> None:
        self._cancel_completion(name)
        when = self.executor.jobs[name].finish_time()
        if when is not None and when <= self.end_s:
            self.completion[name] = self.loop.at(
                max(when, self.loop.now), lambda: self._complete(name), priority=_DONE
            )

    def _schedule_phase(self, name: str) -> None:
        job = self.executor.jobs[name]
        when = job.active_from + self.config.measure_s
        self.profiling[name].event = self.loop.at(
            when, lambda: self._phase_done(name), priority=_PHASE
        )

    def _close_segment(self, name: str, now: float) -> None:
        """Job Monitor: a run at one count long enough becomes a throughput record."""
        job = self.executor.jobs[name]
        seg = self._segment.pop(name, None)
        if seg is None or name in self.profiling:
            return
        start, count = seg
        if count > 0 and now - max(start, job.active_from) >= self.config.min_record_s:
            self.policy.observe(name, count, float(job.truth(count)))

    def _apply(self, assignment: dict[str, tuple[str, ...]]) -> list[str]:
        now = self.loop.now
        for name, nodes in assignment.items():
            job = self.executor.jobs[name]
            if set(nodes) != set(job.nodes) or job.before is not None:
                self._close_segment(name, now)
        changed = self.executor.apply(now, assignment)
        for name in changed:
            self._segment[name] = (now, len(assignment[name]))
            self._schedule_completion(name)
        return changed

    def _views(self) -> list[JobView]:
        views = []
        for name in self.state.running:
            job = self.executor.jobs[name]
            views.append(
                JobView(job.spec, len(job.nodes), name in self.profiling, job.last_interrupt_s)
            )
        return views

    def _admit(self) -> None:
        while self.state.queue and len(self.state.running) < self.config.max_running:
            spec = self.state.queue.pop(0)
            self.executor.add(spec)
            self.state.running.append(spec.job)

    def _allocate(self) -> None:
        now = self.loop.now
        self.state.pending = None
        self.state.dirty.clear()
        self._admit()
        pool = len(self.state.pool)
        if self.state.running:
            started = time.perf_counter()
            decision = self.policy.allocate(now, pool, self._views())
            if decision.solve is not None:
                self.statuses[decision.solve.status] = (
                    self.statuses.get(decision.solve.status, 0) + 1
                )
            current = {n: self.executor.jobs[n].nodes for n in self.state.running}
            used = {node for nodes in current.values() for node in nodes}
            assignment = map_to_nodes(current, decision.counts, self.state.pool - used)
            self.solve_s.append(time.perf_counter() - started)
            for name, order in decision.profile.items():
                self.profiling[name] = _Profiling(order, started_s=now, ups=1)
            self._apply(assignment)
            for name in decision.profile:
                self._schedule_phase(name)
        used_now = sum(len(self.executor.jobs[n].nodes) for n in self.state.running)
        self.timeline.append((now, pool, used_now))

    # -- run -------------------------------------------------------------------------------

    def run(self) -> ScavengeResult:
        for index, change in enumerate(self.trace.changes):
            if change.time_s < self.end_s:
                self.loop.at(change.time_s, lambda i=index: self._pool_change(i), priority=_POOL)  # type: ignore[misc]
        for spec in self.specs:
            if spec.submit_s < self.end_s:
                self.loop.at(spec.submit_s, lambda s=spec: self._arrive(s), priority=_ARRIVE)  # type: ignore[misc]
        self.loop.run(until=self.end_s)
        now = self.end_s
        for name in list(self.state.running):
            self._close_segment(name, now)
        return self._result(now)

    def _result(self, now: float) -> ScavengeResult:
        jobs = list(self.executor.jobs.values())
        samples = sum(j.progress(now) for j in jobs)
        times = np.array([t for t, _, _ in self.timeline] + [now])
        pool = np.array([p for _, p, _ in self.timeline], dtype=np.float64)
        used = np.array([u for _, _, u in self.timeline], dtype=np.float64)
        idle_node_s = float(np.sum(pool * np.diff(times))) if len(pool) else 0.0
        used_node_s = float(np.sum(used * np.diff(times))) if len(used) else 0.0
        finished = [j for j in jobs if j.finished_s is not None]
        jcts = [j.finished_s - j.spec.submit_s for j in finished if j.finished_s is not None]
        prof = list(self.profiled_cost.values())
        return ScavengeResult(
            policy=self.policy.name,
            end_s=now,
            jobs=len(self.specs),
            started=len(jobs),
            finished=len(finished),
            samples=samples,
            lost_samples=sum(j.lost for j in jobs),
            jcts=jcts,
            idle_node_s=idle_node_s,
            used_node_s=used_node_s,
            rescales=sum(j.rescales for j in jobs),
            preemptions=sum(j.preemptions for j in jobs),
            paused_node_s=sum(j.paused_node_s for j in jobs),
            solve_s=list(self.solve_s),
            solver_status=dict(self.statuses),
            profiled_jobs=len(prof),
            profiling_s=sum(p[2] for p in prof),
            profiling_rescales=sum(p[0] + p[1] for p in prof),
            timeline=list(self.timeline),
            job_history={j.spec.job: list(j.history) for j in jobs},
        )


def simulate_scavenge(
    trace: IdleTrace,
    jobs: Sequence[ScavengeJob],
    policy: ScavengePolicy,
    config: ScavengeConfig | None = None,
) -> ScavengeResult:
    """Replay ``trace`` with ``jobs`` under ``policy``."""
    return ScavengeSimulator(trace, jobs, policy, config).run()


__all__ = ["ScavengeConfig", "ScavengeSimulator", "SimJob", "simulate_scavenge"]
