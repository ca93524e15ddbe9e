"""The driver of a real run: rounds of loans, policy and placement, then steps and requests."""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from faasml.cluster.goodput import AppModel
from faasml.cluster.inference import InferenceService
from faasml.cluster.loans import LoanManager, reserve_servers, serve_first
from faasml.cluster.plain import Cluster, Job, Placement, Server
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.ray_run.config import DAY_S, RunConfig
from faasml.cluster.ray_run.outcomes import Calibration, RunResult, StepSample
from faasml.cluster.ray_run.sizing import InferenceSizer, route
from faasml.cluster.ray_run.workers import InferenceWorker, RealJob, TrainWorker
from faasml.cluster.records import Decision, JobView, check_allocation
from faasml.cluster.simulator import _plan_back, _plan_local
from faasml.exceptions import ConfigError


@dataclass
class _Request:
    service: int
    sent: float
    """When the request arrived (its latency counts from here)."""
    ref: Any


class RayRunner:
    """Drives one real run (the package docstring); use :func:`run_on_ray`."""

    def __init__(
        self,
        ray: Any,
        jobs: Sequence[Job],
        models: Mapping[str, AppModel],
        cluster: Cluster,
        policy: ClusterPolicy,
        config: RunConfig,
        services: Sequence[InferenceService],
        workdir: Path,
    ) -> None:
        self.ray = ray
        self.models = models
        self.cluster = cluster
        self.policy = policy
        self.cfg = config
        self.workdir = workdir
        self.services = list(services)
        self.train_cls = ray.remote(num_cpus=0)(TrainWorker)
        self.infer_cls = ray.remote(num_cpus=0)(InferenceWorker)
        self.jobs = [
            RealJob(j, config.seed + i, config.steps, config.batch, workdir / f"{i}.pt")
            for i, j in enumerate(jobs)
        ]
        scale = DAY_S / config.day_s
        self.scale = scale
        reserve = reserve_servers(self.services, config.round_s * scale, cluster.gpus_per_server)
        self.manager = LoanManager(cluster, reserve, config.loaning) if self.services else None
        self.sizer = InferenceSizer(self.services, config, scale)
        self.infer_workers: list[list[tuple[int, Any, float]]] = [[] for _ in self.services]
        """Each service's serving slots this round: (server, warm actor, serving from)."""
        self.slots: dict[int, list[Any]] = {}
        """Warm serving actors of every server, one per GPU (started before the clock)."""
        self.requests: list[_Request] = []
        self.latencies: list[float] = []
        self.sent = 0
        self.ok = 0
        self.loaned = 0
        self.reclaimed = 0
        self._rng = np.random.default_rng(config.seed)
        self._scheduled_until = 0.0
        self._t0 = 0.0

    # -- placement --------------------------------------------------------------------
    def _start(self, rj: RealJob, placement: Placement, now: float) -> None:
        if rj.workers:
            self._stop(rj)
            rj.outcome.restarts += 1
        rj.placement = placement
        if not placement:
            return
        if rj.outcome.start_s is None:
            rj.outcome.start_s = now
        rj.placed_at = time.monotonic()
        rj.workers = [
            self.train_cls.options(resources={f"server{sid}": 1}).remote(
                rj.seed, rank, len(placement), rj.batch
            )
            for rank, sid in enumerate(placement)
        ]

    def _stop(self, rj: RealJob) -> None:
        """Finish the step in flight, checkpoint, stop the workers."""
        if rj.inflight is not None:
            self._apply(rj, self.ray.get(rj.inflight))
            rj.inflight = None
        rj.checkpoint()
        for w in rj.workers:
            self.ray.kill(w)
        rj.workers = []
        rj.unplace()

    def _apply(self, rj: RealJob, results: list[tuple[list[Any], float]]) -> None:
        """Apply a step; the job completes when its last step is applied."""
        rj.apply(results)
        if rj.outcome.steps >= rj.work and rj.outcome.completion_s is None:
            rj.outcome.completion_s = time.monotonic() - self._t0
            rj.unplace()

    def calibrate(self, placements: Sequence[Placement], steps: int = 10) -> Calibration:
        """Measure, on this Ray cluster and through the run's own code, what the simulator
        needs to predict the run (:mod:`faasml.cluster.ray_predict`): one job walks through
        ``placements``; at each it is (re)started the way the run rescales (finish the step
        in flight, checkpoint, stop the workers, restore, start new ones), then takes
        ``steps`` timed steps. A (re)start's time is the time to its first step done, less
        one step at the new layout."""
        for placement in placements:
            if not placement or any(not 0 <= s < len(self.cluster.servers) for s in placement):
                raise ConfigError(
                    f"the calibration placement {placement} must name servers 0 to "
                    f"{len(self.cluster.servers) - 1}"
                )
            self.cluster.free({"calibration": placement})  # no server oversubscribed
        job = Job("calibration", "calibration", 0.0, 1, self.cfg.batch)
        rj = RealJob(job, self.cfg.seed, 1 << 30, self.cfg.batch, self.workdir / "cal.pt")
        samples: list[StepSample] = []
        restarts: list[float] = []
        try:
            for placement in placements:
                tic = time.monotonic()
                self._start(rj, tuple(sorted(placement)), 0.0)
                self._step(rj)  # waits for the new workers
                first = time.monotonic() - tic
                tic = time.monotonic()
                for _ in range(steps):
                    self._step(rj)
                step = (time.monotonic() - tic) / steps
                samples.append(StepSample(self.cluster.layout(placement), step))
                restarts.append(max(first - step, 0.0))
        finally:
            for w in rj.workers:
                self.ray.kill(w)
        return Calibration(tuple(samples), tuple(restarts))

    def _step(self, rj: RealJob) -> None:
        """One synchronous step of a job (the run's step: parameters out, gradients back,
        averaged and applied by the driver)."""
        params = self.ray.put(rj.params())
        rj.apply(self.ray.get([w.grad.remote(params, rj.outcome.steps) for w in rj.workers]))

    def warm_up(self) -> None:
        """Start one serving actor per GPU of every server that inference may use (at most
        the services' summed ``max_scale`` per server: no server ever serves more) and wait
        until each has answered once, before the clock starts: a serverless platform keeps
        inference containers warm (FaPES §3.3), so the run measures serving, not start-up.
        A slot takes a ``serve<i>`` unit, not a ``server<i>`` (GPU) one: which GPUs serve
        is the driver's accounting (the loan manager's inference VC), as for training."""
        if self.manager is None:
            return
        seeds = [100 + i for i in range(len(self.services))]
        servers: Sequence[int] = range(len(self.cluster.servers))
        if self.manager.mode != "fapes":  # inference never leaves its home servers
            servers = self.manager.home
        most = sum(s.max_scale for s in self.services)
        for sid in servers:
            self.slots[sid] = [
                self.infer_cls.options(resources={f"serve{sid}": 1}).remote(seeds)
                for _ in range(min(self.cluster.servers[sid].gpus, most))
            ]
        x = np.zeros((1, 16), dtype=np.float32)
        self.ray.get([a.infer.remote(0, x) for actors in self.slots.values() for a in actors])

    def _size_inference(self, counts: Sequence[int], servers: frozenset[int], now: float) -> None:
        """Give each service ``counts[i]`` serving slots on the inference servers, keeping
        the slots it had there (requests in flight on a slot taken away still finish); a
        slot it did not have serves from ``now + inference_start_s``."""
        keep: list[list[tuple[int, Any, float]]] = []
        for i, want in enumerate(counts):
            keep.append([slot for slot in self.infer_workers[i] if slot[0] in servers][:want])
        taken = {id(slot[1]) for ws in keep for slot in ws}
        free = [
            (s, a) for s in sorted(servers) for a in self.slots.get(s, []) if id(a) not in taken
        ]
        since = now + self.cfg.inference_start_s
        for i, want in enumerate(counts):
            while len(keep[i]) < want and free:
                server, actor = free.pop(0)
                keep[i].append((server, actor, since))
        self.infer_workers = keep

    # -- the run ----------------------------------------------------------------------
    def run(self, calibrate: Sequence[Placement] = ()) -> RunResult:
        """Warm the serving slots, calibrate on ``calibrate`` (if any), then run the jobs
        and services on the clock."""
        cfg = self.cfg
        self.warm_up()
        calibration = self.calibrate(calibrate) if calibrate else None
        t0 = self._t0 = time.monotonic()
        pending = sorted(self.jobs, key=lambda r: r.job.arrival_s)
        active: list[RealJob] = []
        last = 0.0
        rounds: list[float] = []
        while (pending or active) and time.monotonic() - t0 < cfg.max_time_s:
            now = time.monotonic() - t0
            rounds.append(now)
            for r in active:
                r.gpu_s += len(r.placement) * (now - last)
            last = now
            while pending and pending[0].job.arrival_s <= now:
                active.append(pending.pop(0))
            current = {r.job.name: r.placement for r in active if r.placement}
            training, ids = self._rebalance(active, current, now)
            if active:
                self._place(active, current, training, ids, now)
            self._serve_round(active, t0, now + cfg.round_s)
            self._retire(active)
        self._shut_down(active, t0)
        return self._result(t0, calibration, rounds)

    def _rebalance(
        self, active: list[RealJob], current: dict[str, Placement], now: float
    ) -> tuple[Cluster | None, tuple[int, ...]]:
        """Size the services for the coming round and loan or reclaim servers; returns the
        training VC (None: no server left) and its servers' global ids. Jobs that lose a
        reclaimed server keep the rest of their placement in ``current``."""
        if self.manager is None:
            return self.cluster, tuple(range(len(self.cluster.servers)))
        rates = self.sizer.rates(now)
        counts = serve_first(self.services, rates, self.manager.max_inference_gpus())
        event = self.manager.rebalance(sum(counts), current)
        self.loaned += len(event.loaned)
        self.reclaimed += len(event.reclaimed)
        gone = set(event.reclaimed)
        for r in active:
            if r.job.name in event.preempted:
                r.outcome.reclaim_preemptions += 1
                kept = tuple(s for s in r.placement if s not in gone)
                current[r.job.name] = kept
                if not kept:
                    del current[r.job.name]
        self._size_inference(counts, event.inference, now)
        ids = tuple(s.id for s in self.cluster.servers if s.id not in self.manager.inference)
        servers = tuple(
            Server(i, self.cluster.servers[g].gpus, self.cluster.servers[g].switch)
            for i, g in enumerate(ids)
        )
        return (Cluster(servers) if servers else None), ids

    def _place(
        self,
        active: list[RealJob],
        current: dict[str, Placement],
        training: Cluster | None,
        ids: tuple[int, ...],
        now: float,
    ) -> None:
        """Ask the policy for the training VC's allocation and (re)start the jobs whose
        placement changed; as the simulator's driver does, with no training server left
        every job stops."""
        local = {g: i for i, g in enumerate(ids)}
        views = [self._view(r, current.get(r.job.name, ()), local, ids) for r in active]
        decision = Decision({})
        if training is not None:
            alloc_local = {
                n: tuple(sorted(local[s] for s in p))
                for n, p in current.items()
                if all(s in local for s in p)
            }
            decision = self.policy.allocate(views, training, alloc_local, now)
            check_allocation(decision.allocation, training, views)
        for r in active:
            new = tuple(sorted(ids[s] for s in decision.allocation.get(r.job.name, ())))
            if new != r.placement:
                self._start(r, new, now)
            r.waiting_rounds = 0 if new else r.waiting_rounds + 1
            if r.job.name in decision.plans:
                r.plan = _plan_back(decision.plans[r.job.name], ids)
            elif not new:
                r.plan = None

    def _retire(self, active: list[RealJob]) -> None:
        """Stop the workers of the jobs that finished this round and drop them from
        ``active``."""
        for r in list(active):
            if r.outcome.steps >= r.work:
                for w in r.workers:
                    self.ray.kill(w)
                r.workers, r.placement = [], ()
                active.remove(r)

    def _shut_down(self, active: list[RealJob], t0: float) -> None:
        """At the end of the clock: checkpoint and stop the jobs still running, wait for the
        requests in flight, stop the serving slots."""
        for r in active:
            if r.workers:
                self._stop(r)
        self._drain(t0, final=True)
        for actors in self.slots.values():
            for a in actors:
                self.ray.kill(a)

    def _result(self, t0: float, calibration: Calibration | None, rounds: list[float]) -> RunResult:
        """The run's outcome, with the sizing settings it ran under."""
        cfg = self.cfg
        return RunResult(
            self.policy.name,
            [r.outcome for r in self.jobs],
            self.sent,
            self.ok,
            self.latencies,
            self.loaned,
            self.reclaimed,
            time.monotonic() - t0,
            sum(len(actors) for actors in self.slots.values()),
            calibration,
            rounds,
            cfg.forecast,
            cfg.forecast_window,
            cfg.headroom,
            cfg.inference_start_s,
        )

    def _view(
        self,
        r: RealJob,
        placement: Placement,
        local: Mapping[int, int],
        ids: tuple[int, ...],
    ) -> JobView:
        """What the policy sees of a job: what the simulator's driver shows it, except
        ``observed`` (the MLP's step times are not the application's)."""
        model = self.models[r.job.application]
        work = model.work(r.job)
        return JobView(
            job=r.job,
            model=model,
            progress=work * r.outcome.steps / r.work,
            work=work,
            placement=tuple(sorted(local[s] for s in placement if s in local)),
            attained_gpu_s=r.gpu_s,
            restarts=r.outcome.restarts,
            waiting_rounds=r.waiting_rounds,
            started=r.outcome.start_s is not None,
            plan=_plan_local(r.plan, ids),
        )

    def _serve_round(self, active: list[RealJob], t0: float, end: float) -> None:
        """Until ``end``: keep one step of every running job in flight, send the requests
        when due, record what completes."""
        ray = self.ray
        # Requests arrive on their own clock: those due while the driver was busy
        # (rescaling, starting workers) are sent late and wait, as real users would.
        schedule = self._request_times(self._scheduled_until, end)
        cap = self.cfg.steps_per_round
        limit = {r.job.name: min(r.work, r.outcome.steps + cap) if cap else r.work for r in active}
        self._scheduled_until = max(self._scheduled_until, end)
        while True:
            now = time.monotonic() - t0
            for r in active:
                if r.workers and r.inflight is None and r.outcome.steps < limit[r.job.name]:
                    params = ray.put(r.params())
                    r.inflight = [w.grad.remote(params, r.outcome.steps) for w in r.workers]
            while schedule and schedule[0][0] <= now:
                _, i, due = schedule.pop(0)
                w, later = route(self.infer_workers[i], now, self.sent + 1)
                if later is not None:  # its slots are starting: it waits for the first
                    bisect.insort(schedule, (later, i, due))
                    continue
                self.sent += 1
                if w is None:
                    continue  # nothing serves it: an SLO miss
                x = self._rng.standard_normal((1, 16)).astype(np.float32)
                self.requests.append(_Request(i, t0 + due, w.infer.remote(i, x)))
            if now >= end and not schedule:
                break
            refs = [ref for r in active if r.inflight for ref in r.inflight]
            refs += [q.ref for q in self.requests]
            wait = min(end, schedule[0][0] if schedule else end) - now
            if refs:
                ray.wait(refs, num_returns=1, timeout=max(wait, 0.0))
            else:
                time.sleep(max(wait, 0.0))
            for r in active:
                if r.inflight is not None:
                    ready, _ = ray.wait(r.inflight, num_returns=len(r.inflight), timeout=0)
                    if len(ready) == len(r.inflight):
                        self._apply(r, ray.get(r.inflight))
                        r.inflight = None
            self._drain(t0)

    def _drain(self, t0: float, final: bool = False) -> None:
        if not self.requests:
            return
        refs = [q.ref for q in self.requests]
        ready, _ = self.ray.wait(
            refs, num_returns=len(refs), timeout=(10.0 if final else 0), fetch_local=False
        )
        ready_set = set(ready)
        left = []
        for q in self.requests:
            if q.ref in ready_set:
                latency = 1000 * (time.monotonic() - q.sent)
                try:
                    self.ray.get(q.ref)
                except Exception:  # a worker stopped under it: the request failed
                    continue
                self.latencies.append(latency)
                if latency <= self.services[q.service].slo_ms:
                    self.ok += 1
            else:
                left.append(q)
        self.requests = left

    def _request_times(self, start: float, end: float) -> list[tuple[float, int, float]]:
        """Poisson request times in wall ``[start, end)`` for each service's scaled rate:
        (when to send, service, when due), sent when due unless held (:func:`route`)."""
        out: list[tuple[float, int, float]] = []
        for i, s in enumerate(self.services):
            durations, rates = s.rate.pieces(start * self.scale, end * self.scale)
            t = start
            for d, rate in zip(durations, rates, strict=True):
                wall = d / self.scale
                n = self._rng.poisson(rate * self.cfg.rate_scale * wall)
                out += [(float(x), i, float(x)) for x in np.sort(self._rng.uniform(t, t + wall, n))]
                t += wall
        return sorted(out)
