"""Trace-driven cluster simulator on faasml's discrete-event core (``faasml.sim.EventLoop``).

Events: job arrivals (from the trace) and scheduling rounds every ``round_s`` seconds. At a
round every running job advances by its true goodput since the last round (crossing epoch
boundaries exactly; the batch size is re-chosen per epoch for adaptive policies), finished
jobs leave, the policy allocates, and every job whose placement changed pays the restart
overhead (FaPES Table 2 by default) before it makes progress again. The clock is virtual
and the run is deterministic under its seed (the seed drives the optional throughput noise
that stands for model error).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from faasml.cluster.goodput import AppModel
from faasml.cluster.metrics import JobRecord, SimResult
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.records import (
    TABLE2_RESTART_S,
    Cluster,
    Job,
    JobView,
    Placement,
    SchedulePlan,
    check_allocation,
)
from faasml.exceptions import ConfigError
from faasml.sim import EventLoop


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings."""

    round_s: float = 60.0
    restart_s: float = TABLE2_RESTART_S
    seed: int = 0
    noise: float = 0.0
    """Std-dev of a log-normal factor on each job's true goodput per round (model error)."""
    max_time_s: float | None = None
    """Stop at this time; unfinished jobs are reported without a JCT."""
    deadline_factor: float | None = None
    """Give jobs without a deadline one: arrival + factor × their run time alone on the GPUs
    they asked for (ElasticFlow's deadline jobs)."""

    def __post_init__(self) -> None:
        if not self.round_s > 0:
            raise ConfigError(f"the value of round is {self.round_s}, but must be > 0 seconds")
        if self.restart_s < 0:
            raise ConfigError(f"the value of restart_s is {self.restart_s}, but must be >= 0")
        if self.noise < 0:
            raise ConfigError(f"the value of noise is {self.noise}, but must be >= 0")
        if self.deadline_factor is not None and self.deadline_factor <= 0:
            raise ConfigError(
                f"the value of deadline_factor is {self.deadline_factor}, but must be > 0"
            )


class _State:
    """Mutable progress of one job inside the simulator."""

    def __init__(self, job: Job, model: AppModel) -> None:
        self.job = job
        self.model = model
        self.work = model.work(job)
        self.progress = 0.0
        self.placement: Placement = ()
        self.restart_left = 0.0
        self.restarts = 0
        self.start: float | None = None
        self.completion: float | None = None
        self.queued = 0.0
        self.running = 0.0
        self.gpu_s = 0.0
        self.waiting_rounds = 0
        self.plan: SchedulePlan | None = None


class Simulator:
    """Runs one policy over one list of jobs on one cluster."""

    def __init__(
        self,
        jobs: Sequence[Job],
        models: Mapping[str, AppModel],
        cluster: Cluster,
        policy: ClusterPolicy,
        config: SimConfig | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.cluster = cluster
        self.policy = policy
        for job in jobs:
            if job.application not in models:
                raise ConfigError(
                    f"job {job.name!r}: unknown application {job.application!r}; "
                    f"choose one of: {', '.join(sorted(models))}"
                )
        self.jobs = [self._with_deadline(j, models[j.application]) for j in jobs]
        self.models = models
        self._rng = np.random.default_rng(self.config.seed)

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
        loop = EventLoop()
        cfg = self.config
        states = {j.name: _State(j, self.models[j.application]) for j in self.jobs}
        active: dict[str, _State] = {}
        pending_arrivals = [len(self.jobs)]
        arrivals = sorted(j.arrival_s for j in self.jobs)
        utilization: list[tuple[float, float]] = []
        sched_times: list[float] = []
        last = [0.0]
        total = self.cluster.total_gpus

        def arrive(state: _State) -> None:
            active[state.job.name] = state
            pending_arrivals[0] -= 1

        for job in self.jobs:
            loop.at(job.arrival_s, functools.partial(arrive, states[job.name]), priority=0)

        def round_() -> None:
            now = loop.now
            dt = now - last[0]
            for state in list(active.values()):
                self._advance(state, last[0], dt)
                if state.completion is not None:
                    del active[state.job.name]
            last[0] = now
            if active:
                current = {n: s.placement for n, s in active.items() if s.placement}
                views = [self._view(s) for s in active.values()]
                tic = time.perf_counter()
                decision = self.policy.allocate(views, self.cluster, current, now)
                sched_times.append(time.perf_counter() - tic)
                check_allocation(decision.allocation, self.cluster, views)
                for name, state in active.items():
                    new = tuple(decision.allocation.get(name, ()))
                    if new != state.placement:
                        if new:
                            state.restart_left = cfg.restart_s
                            if state.start is None:
                                state.start = now
                            else:
                                state.restarts += 1
                        state.placement = new
                    state.waiting_rounds = 0 if new else state.waiting_rounds + 1
                    if name in decision.plans:
                        state.plan = decision.plans[name]
                    elif not new:
                        state.plan = None
            used = sum(len(s.placement) for s in active.values())
            utilization.append((now, used / total))
            if not active and not pending_arrivals[0]:
                return
            step = cfg.round_s
            if not active:
                # Nothing to run until the next arrival: skip the idle rounds before it.
                step = self._idle_skip(now, arrivals[len(arrivals) - pending_arrivals[0]])
            if cfg.max_time_s is not None and now + step > cfg.max_time_s:
                step = math.floor((cfg.max_time_s - now) / cfg.round_s) * cfg.round_s
            if step > 0:
                if now + step <= now:
                    raise ConfigError(
                        f"the round of {cfg.round_s} s is below the clock's resolution at "
                        f"{now} s; use a longer round or earlier times"
                    )
                loop.at(now + step, round_, priority=1)

        loop.at(0.0, round_, priority=1)
        loop.run()
        records = tuple(self._record(states[j.name]) for j in self.jobs)
        return SimResult(
            self.policy.name, records, tuple(utilization), tuple(sched_times), cfg.round_s
        )

    def _idle_skip(self, now: float, arrival: float) -> float:
        """Seconds to the first round at or after ``arrival``: a whole number of rounds, as
        if every idle round in between had run (each would have found nothing to do)."""
        r = self.config.round_s
        n = max(math.ceil((arrival - now) / r - 1e-9), 1)
        while now + n * r < arrival:
            n += 1
        return n * r

    def _view(self, state: _State) -> JobView:
        return JobView(
            job=state.job,
            model=state.model,
            progress=state.progress,
            work=state.work,
            placement=state.placement,
            attained_gpu_s=state.gpu_s,
            restarts=state.restarts,
            waiting_rounds=state.waiting_rounds,
            started=state.start is not None,
            plan=state.plan,
        )

    def _advance(self, state: _State, t0: float, dt: float) -> None:
        """Move a job ``dt`` seconds forward from ``t0`` at its true goodput."""
        if dt <= 0:
            return
        if not state.placement:
            state.queued += max(dt - max(state.job.arrival_s - t0, 0.0), 0.0)
            return
        state.gpu_s += dt * len(state.placement)
        delay = min(state.restart_left, dt)
        state.restart_left -= delay
        t, end = t0 + delay, t0 + dt
        layout = self.cluster.layout(state.placement)
        factor = 1.0
        if self.config.noise > 0:
            factor = math.exp(self._rng.normal(0.0, self.config.noise))
        adaptive = self.policy.adaptive
        while t < end - 1e-12 and state.completion is None:
            choice = state.model.choose_cached(layout, state.progress, state.job, adaptive=adaptive)
            rate = choice.goodput * factor
            if rate <= 0:
                break
            epoch = state.model.epoch_of(state.progress)
            mark = min(state.model.progress_at(epoch + 1), state.work)
            if mark <= state.progress:
                mark = state.work
            need = (mark - state.progress) / rate
            if t + need > end:
                state.progress += rate * (end - t)
                t = end
            else:
                state.progress = mark
                t += need
                if state.progress >= state.work - 1e-9:
                    state.completion = t
        # A finished job holds its GPUs until the round ends (freed at the next round).
        state.running += (end if state.completion is None else state.completion) - t0

    def _record(self, state: _State) -> JobRecord:
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
        )


def simulate(
    jobs: Sequence[Job],
    models: Mapping[str, AppModel],
    cluster: Cluster,
    policy: ClusterPolicy,
    config: SimConfig | None = None,
) -> SimResult:
    """Simulate ``policy`` over ``jobs`` on ``cluster``; see :class:`Simulator`."""
    return Simulator(jobs, models, cluster, policy, config).run()
