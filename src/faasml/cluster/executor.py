"""The executor contract of cluster mode: what runs the jobs a policy places.

A driver (the simulator's round loop: arrivals, inference and loans, the policy, restart
accounting) decides *where* jobs run; an executor makes them *progress*. Two executors fit
the contract: :class:`SimulatedExecutor`, which advances each job at its true goodput from
the measured traces (the trace-driven simulator), and a real one that runs workers (for
example on Ray) and reads their progress back. Policies, inference services and FaPES-Manager
loans sit in the driver, so they are the same under either executor.

The contract (:class:`Executor`): ``advance(state, t0, dt)`` accounts one job's ``dt``
seconds from ``t0`` in its :class:`JobState` — progress (kept across preemptions: a job is
checkpointed when it stops), the restart overhead still to pay, completion, the GPU and
queuing time, and the throughput the job measured (``observed``, what learning policies fit
their models to); ``place(state, now)`` is told when the driver moves a job (its
``state.placement`` is the new one; empty: it stops). The simulated executors compute the
interval at ``advance`` and need nothing at ``place``; the real one
(:mod:`faasml.cluster.ray_run`) restarts workers at ``place`` and, since jobs run at once,
lets them run while the driver's wall clock passes, ``advance`` reading their progress back.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from faasml.cluster.goodput import AppModel
from faasml.cluster.plain import Cluster, Job, Layout, Observation, Placement, SchedulePlan


class JobState:
    """Mutable progress of one job: what the driver and its executor share."""

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
        self.reclaim_preemptions = 0
        self.observed: dict[tuple[Layout, int, int], Observation] = {}


class Executor(Protocol):
    """Makes placed jobs progress (module docstring)."""

    def advance(self, state: JobState, t0: float, dt: float) -> None: ...

    def place(self, state: JobState, now: float) -> None: ...


def begin_interval(state: JobState, t0: float, dt: float) -> float | None:
    """Account a job's next ``dt`` seconds from ``t0`` that do not depend on its speed:
    queuing when it holds no GPUs, GPU-seconds and the restart it still pays when it does.
    Returns when training starts in the interval, or None when it does not train."""
    if dt <= 0:
        return None
    if not state.placement:
        state.queued += max(dt - max(state.job.arrival_s - t0, 0.0), 0.0)
        return None
    state.gpu_s += dt * len(state.placement)
    delay = min(state.restart_left, dt)
    state.restart_left -= delay
    return t0 + delay


class SimulatedExecutor:
    """Advances jobs at their true goodput (the trace-driven model of the simulator)."""

    def __init__(self, cluster: Cluster, *, adaptive: bool, noise: float = 0.0, seed: int = 0):
        self.cluster = cluster
        self.adaptive = adaptive
        self.noise = noise
        self.rng = np.random.default_rng(seed)

    def place(self, state: JobState, now: float) -> None:
        """Nothing to start: the driver accounts the restart (``restart_left``)."""

    def advance(self, state: JobState, t0: float, dt: float) -> None:
        """Move a job ``dt`` seconds forward from ``t0`` at its true goodput."""
        start = begin_interval(state, t0, dt)
        if start is None:
            return
        t, end = start, t0 + dt
        layout = self.cluster.layout(state.placement)
        factor = 1.0
        if self.noise > 0:
            factor = math.exp(self.rng.normal(0.0, self.noise))
        adaptive = self.adaptive
        while t < end - 1e-12 and state.completion is None:
            choice = state.model.choose_cached(layout, state.progress, state.job, adaptive=adaptive)
            key = (layout, choice.atomic_bsz, choice.accum_steps)
            if key not in state.observed:  # the job reports what it measures (Pollux §3.1)
                step, sync = state.model.step_sync(layout, np.array([float(choice.atomic_bsz)]))
                state.observed[key] = Observation(
                    layout.counts,
                    layout.switches,
                    choice.atomic_bsz,
                    choice.accum_steps,
                    float(step[0]) / factor,
                    float(sync[0]) / factor,
                )
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
