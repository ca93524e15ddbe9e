"""Trace-driven cluster simulator on faasml's discrete-event core (``faasml.sim.EventLoop``).

Events: job arrivals (from the trace) and scheduling rounds every ``round_s`` seconds. At a
round every running job advances by its true goodput since the last round (crossing epoch
boundaries exactly; the batch size is re-chosen per epoch for adaptive policies), finished
jobs leave, the policy allocates, and every job whose placement changed pays the restart
overhead (FaPES Table 2 by default) before it makes progress again. The clock is virtual
and the run is deterministic under its seed (the seed drives the optional throughput noise
that stands for model error).

The same driver runs a real run (``faasml cluster run``): it is given an executor that
runs workers (``Executor.place`` / ``advance``), the services' real serving slots
(:class:`~faasml.cluster.pool.Serving`) and a wall clock (``clock``) that passes time while
they work; it never reads the time itself.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from faasml.cluster.executor import Executor, JobState, SimulatedExecutor
from faasml.cluster.goodput import AppModel
from faasml.cluster.inference import InferenceService
from faasml.cluster.metrics import JobRecord, SimResult
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.pool import InferencePool, Serving
from faasml.cluster.records import (
    Cluster,
    Decision,
    Job,
    JobView,
    Placement,
    SchedulePlan,
    Segment,
    check_allocation,
)
from faasml.cluster.sim_config import SimConfig
from faasml.exceptions import ConfigError
from faasml.sim import EventLoop
from faasml.sim.engine import Clock

__all__ = ["SimConfig", "Simulator", "simulate"]


class Simulator:
    """Runs one policy over one list of jobs on one cluster."""

    def __init__(
        self,
        jobs: Sequence[Job],
        models: Mapping[str, AppModel],
        cluster: Cluster,
        policy: ClusterPolicy,
        config: SimConfig | None = None,
        services: Sequence[InferenceService] = (),
        executor: Executor | None = None,
        *,
        clock: Clock | None = None,
        serving: Serving | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.clock = clock
        """The driver's time (None: virtual, a fresh one per run); a real run's passes wall
        time while its executor's workers run."""
        self.serving = serving
        """Where the services run (None: modelled from their traces)."""
        self.cluster = cluster
        self.policy = policy
        self.services = tuple(services)
        for job in jobs:
            if job.application not in models:
                raise ConfigError(
                    f"job {job.name!r}: unknown application {job.application!r}; "
                    f"choose one of: {', '.join(sorted(models))}"
                )
        self.jobs = [self._with_deadline(j, models[j.application]) for j in jobs]
        self.models = models
        self.executor: Executor = executor or SimulatedExecutor(
            cluster, adaptive=policy.adaptive, noise=self.config.noise, seed=self.config.seed
        )

    def _with_deadline(self, job: Job, model: AppModel) -> Job:
        factor = self.config.deadline_factor
        if factor is None or job.deadline_s is not None:
            return job
        gpus = max(min(job.gpus, model.max_gpus(job), self.cluster.total_gpus), 1)
        layout = self.cluster.packed_layout(gpus)
        # Run time alone: integrate epoch by epoch at the fixed batch size.
        seconds, progress, work = 0.0, 0.0, model.work(job)
        while progress < work - 1e-9:
            rate = model.choose_cached(layout, progress, job, adaptive=False).goodput
            mark = min(model.progress_at(model.epoch_of(progress) + 1), work)
            if mark <= progress or rate <= 0:
                break
            seconds += (mark - progress) / rate
            progress = mark
        return replace(job, deadline_s=job.arrival_s + factor * max(seconds, 1.0))

    def run(self) -> SimResult:
        loop = EventLoop(self.clock)
        cfg = self.config
        states = {j.name: JobState(j, self.models[j.application]) for j in self.jobs}
        active: dict[str, JobState] = {}
        pending_arrivals = [len(self.jobs)]
        arrivals = sorted(j.arrival_s for j in self.jobs)
        utilization: list[tuple[float, float]] = []
        sched_times: list[float] = []
        last = [0.0]
        total = self.cluster.total_gpus
        pool = (
            InferencePool(self.cluster, self.services, cfg, self.serving) if self.services else None
        )

        def arrive(state: JobState) -> None:
            active[state.job.name] = state
            pending_arrivals[0] -= 1

        pending = [
            loop.at(j.arrival_s, functools.partial(arrive, states[j.name]), priority=0)
            for j in self.jobs
        ]

        def round_() -> None:
            now = loop.now
            dt = now - last[0]
            for state in list(active.values()):
                self.executor.advance(state, last[0], dt)
                if state.completion is not None:
                    del active[state.job.name]
            current = {n: s.placement for n, s in active.items() if s.placement}
            cluster: Cluster | None = self.cluster
            to_global: tuple[int, ...] | None = None
            inference_gpus = 0
            if pool is not None:
                pool.tally(last[0], now)
                current = pool.rebalance(now, current, active, self.policy.elastic)
                cluster, to_global = pool.training_cluster()
                inference_gpus = sum(pool.gpus)
            last[0] = now
            if active:
                self._allocate(active, current, cluster, to_global, now, sched_times)
            used = sum(len(s.placement) for s in active.values())
            utilization.append((now, (used + inference_gpus) / total))
            if not active and not pending_arrivals[0]:
                return
            arrival = arrivals[len(arrivals) - pending_arrivals[0]] if not active else None
            step = self._next_step(now, arrival, pool)
            if step > 0:
                loop.at(now + step, round_, priority=1)
            else:  # the last round: later arrivals change nothing (nor wait on a wall clock)
                for event in pending:
                    event.cancel()

        loop.at(0.0, round_, priority=1)
        loop.run()
        records = tuple(self._record(states[j.name]) for j in self.jobs)
        return SimResult(
            self.policy.name,
            records,
            tuple(utilization),
            tuple(sched_times),
            cfg.round_s,
            loans=pool.summary(states.values()) if pool is not None else None,
        )

    def _allocate(
        self,
        active: dict[str, JobState],
        current: dict[str, Placement],
        cluster: Cluster | None,
        to_global: tuple[int, ...] | None,
        now: float,
        sched_times: list[float],
    ) -> None:
        """Ask the policy for the training VC's allocation (timed) and apply it: a job whose
        placement changed pays the restart; with no training VC every job stops."""
        cfg = self.config
        views = [self._view(s, current.get(n, ()), to_global) for n, s in active.items()]
        local = _mapped(current, to_global)
        tic = time.perf_counter()
        decision = (
            self.policy.allocate(views, cluster, local, now)
            if cluster is not None
            else Decision({})
        )
        sched_times.append(time.perf_counter() - tic)
        if cluster is not None:
            check_allocation(decision.allocation, cluster, views)
        for name, state in active.items():
            new = _back(tuple(decision.allocation.get(name, ())), to_global)
            if new != state.placement:
                if new:
                    state.restart_left = cfg.restart_s
                    if state.start is None:
                        state.start = now
                    else:
                        state.restarts += 1
                state.placement = new
                self.executor.place(state, now)
            state.waiting_rounds = 0 if new else state.waiting_rounds + 1
            if name in decision.plans:
                state.plan = _plan_back(decision.plans[name], to_global)
            elif not new:
                state.plan = None

    def _next_step(self, now: float, arrival: float | None, pool: InferencePool | None) -> float:
        """Seconds to the next round: one round, or with no job active (``arrival``: the
        next one's) the idle rounds before it skipped; cut at ``max_time_s`` (0: stop)."""
        cfg = self.config
        step = cfg.round_s
        if arrival is not None:
            # Nothing to run until the next arrival: skip the idle rounds before it.
            # With inference services, only up to their first load: from then on their
            # load changes, so every round runs.
            if pool is not None:  # the round whose window holds the first load
                arrival = min(arrival, pool.first_load - cfg.round_s)
            if arrival > now:
                step = self._idle_skip(now, arrival)
        if cfg.max_time_s is not None and now + step > cfg.max_time_s:
            step = math.floor((cfg.max_time_s - now) / cfg.round_s) * cfg.round_s
        if step > 0 and now + step <= now:
            raise ConfigError(
                f"the round of {cfg.round_s} s is below the clock's resolution at "
                f"{now} s; use a longer round or earlier times"
            )
        return step

    def _idle_skip(self, now: float, arrival: float) -> float:
        """Seconds to the first round at or after ``arrival``: a whole number of rounds, as
        if every idle round in between had run (each would have found nothing to do)."""
        r = self.config.round_s
        n = max(math.ceil((arrival - now) / r - 1e-9), 1)
        while now + n * r < arrival:
            n += 1
        return n * r

    def _view(
        self, state: JobState, placement: Placement, to_global: tuple[int, ...] | None
    ) -> JobView:
        return JobView(
            job=state.job,
            model=state.model,
            progress=state.progress,
            work=state.work,
            placement=_local(placement, to_global) or (),
            attained_gpu_s=state.gpu_s,
            restarts=state.restarts,
            waiting_rounds=state.waiting_rounds,
            started=state.start is not None,
            plan=_plan_local(state.plan, to_global),
            observed=tuple(state.observed.values()),
        )

    def _record(self, state: JobState) -> JobRecord:
        rate = state.progress / state.running if state.running else 0.0
        goodput = rate * state.model.init_batch
        one = state.model.choose_cached(
            self.cluster.packed_layout(1), 0.0, state.job, adaptive=True
        ).goodput
        return JobRecord(
            name=state.job.name,
            application=state.job.application,
            arrival_s=state.job.arrival_s,
            start_s=state.start,
            completion_s=state.completion,
            queued_s=state.queued,
            running_s=state.running,
            goodput=goodput,
            restarts=state.restarts,
            gpu_s=state.gpu_s,
            deadline_s=state.job.deadline_s,
            speedup=rate / one if one > 0 else 0.0,
            progress=state.progress,
            reclaim_preemptions=state.reclaim_preemptions,
        )


def simulate(
    jobs: Sequence[Job],
    models: Mapping[str, AppModel],
    cluster: Cluster,
    policy: ClusterPolicy,
    config: SimConfig | None = None,
    services: Sequence[InferenceService] = (),
) -> SimResult:
    """Simulate ``policy`` over ``jobs`` on ``cluster`` (with inference ``services`` served
    first and servers loaned per ``config.loaning``); see :class:`Simulator`."""
    return Simulator(jobs, models, cluster, policy, config, services).run()


def _local(placement: Placement, to_global: tuple[int, ...] | None) -> Placement | None:
    """A placement in the ids of the training VC's cluster; None if a server left it."""
    if to_global is None:
        return placement
    index = {g: i for i, g in enumerate(to_global)}
    if any(s not in index for s in placement):
        return None
    return tuple(sorted(index[s] for s in placement))


def _back(placement: Placement, to_global: tuple[int, ...] | None) -> Placement:
    if to_global is None:
        return placement
    return tuple(sorted(to_global[s] for s in placement))


def _mapped(
    allocation: Mapping[str, Placement], to_global: tuple[int, ...] | None
) -> dict[str, Placement]:
    out = {}
    for name, placement in allocation.items():
        local = _local(placement, to_global)
        if local:
            out[name] = local
    return out


def _plan_local(
    plan: SchedulePlan | None, to_global: tuple[int, ...] | None
) -> SchedulePlan | None:
    """A plan in training-VC ids; a plan that uses a server now lent away is dropped (the
    policy then treats the job as one that outlived its plan)."""
    if plan is None or to_global is None:
        return plan
    segments = []
    for seg in plan.segments:
        local = _local(seg.placement, to_global)
        if local is None:
            return None
        segments.append(Segment(seg.start, seg.end, local))
    return SchedulePlan(tuple(segments), plan.achievement)


def _plan_back(plan: SchedulePlan, to_global: tuple[int, ...] | None) -> SchedulePlan:
    if to_global is None:
        return plan
    segments = tuple(Segment(g.start, g.end, _back(g.placement, to_global)) for g in plan.segments)
    return SchedulePlan(segments, plan.achievement)
