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
import numbers
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from faasml.cluster.executor import Executor, JobState, SimulatedExecutor
from faasml.cluster.forecast import check_forecast, provision_rate
from faasml.cluster.goodput import AppModel
from faasml.cluster.inference import InferenceService, ServiceTally
from faasml.cluster.loans import LoanManager, check_loaning, reserve_servers, serve_first
from faasml.cluster.metrics import JobRecord, SimResult
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.records import (
    TABLE2_RESTART_S,
    Cluster,
    Decision,
    Job,
    JobView,
    Placement,
    SchedulePlan,
    Segment,
    Server,
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
    loaning: str = "fapes"
    """With inference services: ``dedicated``, ``one-way``, ``fapes`` (FaPES §7.1) or
    ``one-way-blind`` (one-way without taking idle servers first)."""
    forecast: str = "exact"
    """How inference is sized each round (``faasml.cluster.forecast``): ``exact`` (the
    coming round's true load, a bound), ``last`` or ``max`` (over ``forecast_window``
    observed rounds), ``seasonal`` (the same round a day earlier) or ``seasonal-last``
    (the larger of the two), times ``headroom``."""
    forecast_window: int = 5
    headroom: float = 1.0
    inference_start_s: float = 0.0
    """Seconds an inference worker added at a round takes before it serves (its start; on a
    reclaimed server after the training job's checkpoint); 0: at once."""

    def __post_init__(self) -> None:
        check_loaning(self.loaning)
        check_forecast(self.forecast, self.forecast_window, self.headroom)
        if not self.round_s > 0:
            raise ConfigError(f"the value of round is {self.round_s}, but must be > 0 seconds")
        if not 0 <= self.restart_s < math.inf:
            raise ConfigError(
                f"the value of restart_s is {self.restart_s}, but must be a finite number >= 0"
            )
        if not 0 <= self.inference_start_s <= self.round_s:
            raise ConfigError(
                f"the value of inference_start_s is {self.inference_start_s}, but must be "
                f"from 0 to the round ({self.round_s:g} s)"
            )
        if not 0 <= self.noise < math.inf:
            raise ConfigError(
                f"the value of noise is {self.noise}, but must be a finite number >= 0"
            )
        if self.deadline_factor is not None and not 0 < self.deadline_factor < math.inf:
            raise ConfigError(
                f"the value of deadline_factor is {self.deadline_factor}, but must be a finite "
                "number > 0"
            )
        if self.max_time_s is not None and not self.max_time_s >= 0:
            raise ConfigError(f"the value of max_time_s is {self.max_time_s}, but must be >= 0")
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, numbers.Integral)
            or self.seed < 0
        ):
            raise ConfigError(f"the value of seed is {self.seed!r}, but must be an integer >= 0")


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
    ) -> None:
        self.config = config or SimConfig()
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
        loop = EventLoop()
        cfg = self.config
        states = {j.name: JobState(j, self.models[j.application]) for j in self.jobs}
        active: dict[str, JobState] = {}
        pending_arrivals = [len(self.jobs)]
        arrivals = sorted(j.arrival_s for j in self.jobs)
        utilization: list[tuple[float, float]] = []
        sched_times: list[float] = []
        last = [0.0]
        total = self.cluster.total_gpus
        pool = _Pool(self.cluster, self.services, cfg) if self.services else None

        def arrive(state: JobState) -> None:
            active[state.job.name] = state
            pending_arrivals[0] -= 1

        for job in self.jobs:
            loop.at(job.arrival_s, functools.partial(arrive, states[job.name]), priority=0)

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
            state.waiting_rounds = 0 if new else state.waiting_rounds + 1
            if name in decision.plans:
                state.plan = _plan_back(decision.plans[name], to_global)
            elif not new:
                state.plan = None

    def _next_step(self, now: float, arrival: float | None, pool: _Pool | None) -> float:
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


class _Pool:
    """Inference services and FaPES-Manager inside the simulator: every round the services
    are sized first (SLO first) for the load ``cfg.forecast`` predicts for the coming round
    (requests above what was provisioned miss the SLO, ``ServiceTally``), the manager moves
    servers between the virtual clusters, and training sees only the training VC."""

    def __init__(
        self, cluster: Cluster, services: Sequence[InferenceService], cfg: SimConfig
    ) -> None:
        self.cluster = cluster
        self.services = services
        self.cfg = cfg
        reserve = reserve_servers(services, cfg.round_s, cluster.gpus_per_server)
        self.manager = LoanManager(cluster, reserve, cfg.loaning)
        self.gpus = [0] * len(services)
        self.before = [0] * len(services)
        """Each service's GPUs in the round before (workers added since are starting)."""
        self.tallies = [ServiceTally() for _ in services]
        self.loaned = 0
        self.reclaimed = 0
        self.preemptions = 0
        self.lost_gpu_s = 0.0
        self.inference_gpu_s = 0.0
        self.first_load = min(float(s.rate.times_s[0]) for s in services)
        """Before this time no service has any load (rates start at their first point)."""

    def tally(self, t0: float, t1: float) -> None:
        start = self.cfg.inference_start_s
        for i, (service, tally) in enumerate(zip(self.services, self.tallies, strict=True)):
            tally.add(service, self.gpus[i], t0, t1, self.before[i], start)
        self.inference_gpu_s += sum(self.gpus) * max(t1 - t0, 0.0)

    def rebalance(
        self,
        now: float,
        current: dict[str, Placement],
        active: Mapping[str, JobState],
        elastic: bool,
    ) -> dict[str, Placement]:
        """Size inference, move servers, and return the training allocation left after any
        reclaim (a preempted job keeps its GPUs elsewhere if it is elastic)."""
        cfg = self.cfg
        rates = [
            provision_rate(
                s.rate, now, cfg.round_s, cfg.forecast, cfg.forecast_window, cfg.headroom
            )
            for s in self.services
        ]
        self.before = self.gpus
        self.gpus = serve_first(self.services, rates, self.manager.max_inference_gpus())
        event = self.manager.rebalance(sum(self.gpus), current)
        self.loaned += len(event.loaned)
        self.reclaimed += len(event.reclaimed)
        gone = set(event.reclaimed)
        out = dict(current)
        for name in event.preempted:
            state = active[name]
            state.reclaim_preemptions += 1
            self.preemptions += 1
            self.lost_gpu_s += self.cfg.restart_s * len(state.placement)
            kept = tuple(s for s in current[name] if s not in gone)
            if kept and elastic:
                out[name] = kept
            else:
                del out[name]
        return out

    def training_cluster(self) -> tuple[Cluster | None, tuple[int, ...]]:
        """The training VC as a cluster of its own (ids 0..n-1) and its servers' pool ids."""
        ids = tuple(s.id for s in self.cluster.servers if s.id not in self.manager.inference)
        if not ids:
            return None, ids
        servers = tuple(
            Server(i, self.cluster.servers[g].gpus, self.cluster.servers[g].switch)
            for i, g in enumerate(ids)
        )
        return Cluster(servers), ids

    def summary(self, states: Iterable[JobState]) -> dict[str, float]:
        requests = sum(t.requests for t in self.tallies)
        seconds = sum(t.seconds for t in self.tallies)
        return {
            "slo_requests": (
                sum(t.requests_ok for t in self.tallies) / requests if requests else 1.0
            ),
            "slo_time": sum(t.seconds_ok for t in self.tallies) / seconds if seconds else 1.0,
            "inference_reserve_servers": float(self.manager.reserve),
            "servers_loaned": float(self.loaned),
            "servers_reclaimed": float(self.reclaimed),
            "reclaim_preemptions": float(self.preemptions),
            "reclaim_lost_gpu_s": self.lost_gpu_s,
            "inference_gpu_s": self.inference_gpu_s,
        }
