"""Real elastic jobs and inference services on a local multi-node Ray cluster.

``faasml cluster run`` drives small real PyTorch training jobs and small inference services
under a cluster policy and FaPES-Manager loans, on Ray nodes that stand for GPU servers.
GPUs are logical here: each node ``i`` has a custom resource ``server<i>`` with one unit per
GPU, and a worker takes one unit, so the policy's placement decides the node it runs on.

- **Training job**: data-parallel SGD of a small MLP on a seeded synthetic regression set.
  Each of its workers (a Ray actor on one "GPU" of its placement) computes the gradient of
  its share of the batch; the driver averages them and steps the optimiser (the driver is
  the parameter server). One step = one unit of progress.
- **Rescaling = checkpoint and restart** (FaPES Table 2's steps): when a job's placement
  changes, its in-flight step finishes, the model and optimiser are written to a checkpoint
  file, its workers are stopped (``ray.kill``), the state is read back from the file and new
  workers start on the new placement. A reclaimed server's workers are stopped this way, so
  nothing is lost beyond the checkpoint (taken at the step boundary: nothing at all).
- **Inference service**: workers (actors) each hold a small model; the driver sends
  requests at the service's trace rate (a trace day compressed into ``day_s`` seconds, rates
  scaled by ``rate_scale``), round-robin over the service's workers, and measures each
  request's latency (send to result) against the SLO.
- **Driver**: every ``round_s`` seconds of wall time, as the simulator does: arrivals,
  inference sized first and servers loaned or reclaimed (:mod:`faasml.cluster.loans`), the
  policy on the training VC, then a single-threaded event loop (``ray.wait``) that keeps one
  step of every running job in flight and sends the requests when due.

Differences from real GPUs: the policies plan with the performance model of the job's
application from the traces (a real deployment would profile the job), so their choices are
the ones they would make for that application, not for the MLP; on real GPUs the workers
would all-reduce with NCCL inside the job (e.g. torch DDP) instead of through the driver,
and a "GPU" here is a slot on a CPU core shared with everything else.

With ``calibrate`` placements the runner first measures the job's step and restart times
(:meth:`RayRunner.calibrate`); :mod:`faasml.cluster.ray_predict` fits the simulator's model
to them and predicts the run (``faasml cluster run --predict``).
"""

from __future__ import annotations

import bisect
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faasml._imports import optional_import
from faasml._ray_config import local_head_args
from faasml.cluster.forecast import check_forecast, predict, seasonal_peak
from faasml.cluster.goodput import AppModel
from faasml.cluster.inference import InferenceService
from faasml.cluster.loans import LoanManager, reserve_servers, serve_first
from faasml.cluster.plain import Cluster, Job, Layout, Placement, SchedulePlan, Server
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.records import Decision, JobView, check_allocation
from faasml.cluster.simulator import _plan_back, _plan_local
from faasml.exceptions import ConfigError

DAY_S = 86400.0


@dataclass(frozen=True)
class RunConfig:
    """Settings of a real run."""

    round_s: float = 2.0
    steps: int = 60
    """Optimiser steps of every job (its work)."""
    steps_per_round: int | None = None
    """At most this many steps of a job per round (None: as many as it can do). A cap
    makes a job last at least ``steps / steps_per_round`` rounds whatever the machine's
    speed, so the rounds at which loans and reclaims happen find it running."""
    batch: int = 64
    day_s: float = 60.0
    """Wall seconds a day of the services' rate traces is compressed into."""
    rate_scale: float = 0.05
    """Real requests per second sent for each request per second of the traces."""
    max_time_s: float = 600.0
    loaning: str = "fapes"
    seed: int = 0
    forecast: str = "exact"
    """How the services are sized each round (as ``SimConfig.forecast``): ``exact`` (the
    coming round's true load, a bound), ``last`` or ``max`` (over ``forecast_window``
    rounds observed), times ``headroom``; see :class:`InferenceSizer`."""
    forecast_window: int = 5
    headroom: float = 1.0
    inference_start_s: float = 0.0
    """Wall seconds a serving slot newly given to a service takes before it serves (the
    slots are warm: the run holds requests off it that long, standing for a worker's
    start); 0: at once."""

    def __post_init__(self) -> None:
        for name in ("round_s", "day_s", "max_time_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"the value of {name} is {getattr(self, name)}, but must be > 0")
        if self.steps_per_round is not None and self.steps_per_round < 1:
            raise ConfigError(
                f"the value of steps_per_round is {self.steps_per_round}, but must be >= 1"
            )
        for name in ("steps", "batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"the value of {name} is {getattr(self, name)}, but must be >= 1")
        if not 0 <= self.rate_scale <= 10:
            raise ConfigError(f"the value of rate_scale is {self.rate_scale}, but must be 0-10")
        check_forecast(self.forecast, self.forecast_window, self.headroom)
        if not 0 <= self.inference_start_s <= self.round_s:
            raise ConfigError(
                f"the value of inference_start_s is {self.inference_start_s}, but must be "
                f"from 0 to the round ({self.round_s:g} s)"
            )


@dataclass
class JobOutcome:
    """What happened to one real job."""

    name: str
    arrival_s: float
    start_s: float | None = None
    completion_s: float | None = None
    steps: int = 0
    restarts: int = 0
    reclaim_preemptions: int = 0
    first_loss: float = math.nan
    last_loss: float = math.nan
    step_history: list[int] = field(default_factory=list)
    """Steps done at every restart (checkpoint): never falls."""
    running_s: float = 0.0
    """Wall time the job held workers (restarts included), as the simulator's running
    time: with its steps, the throughput it really had."""

    @property
    def jct(self) -> float | None:
        return None if self.completion_s is None else self.completion_s - self.arrival_s


@dataclass(frozen=True)
class StepSample:
    """A calibration measurement: the mean step time of a job on one layout."""

    layout: Layout
    step_s: float


@dataclass(frozen=True)
class Calibration:
    """What :meth:`RayRunner.calibrate` measured on the run's own Ray cluster: step times
    on layouts, and the time of every (re)start (stop, checkpoint, start, restore) beyond
    one step."""

    steps: tuple[StepSample, ...]
    restarts_s: tuple[float, ...]


@dataclass
class RunResult:
    policy: str
    jobs: list[JobOutcome]
    requests: int
    requests_ok: int
    latencies_ms: list[float]
    servers_loaned: int
    servers_reclaimed: int
    wall_s: float
    serving_slots: int = 0
    """Warm serving actors started (and answering) before the clock started."""
    calibration: Calibration | None = None
    """Step and restart times measured before the clock started (with ``calibrate``)."""
    rounds_s: list[float] = field(default_factory=list)
    """When each scheduling round started (a round starts ``round_s`` after the one before
    began, or later when the driver was still busy)."""
    forecast: str = "exact"
    """How the services were sized (``RunConfig.forecast``, ``forecast_window``,
    ``headroom``, ``inference_start_s``), recorded beside the SLO attainment measured."""
    forecast_window: int = 5
    headroom: float = 1.0
    inference_start_s: float = 0.0

    def summary(self) -> dict[str, float]:
        jcts = [j.jct for j in self.jobs if j.jct is not None]
        lat = self.latencies_ms
        return {
            "jobs": float(len(self.jobs)),
            "completed": float(len(jcts)),
            "avg_jct_s": float(np.mean(jcts)) if jcts else math.nan,
            "restarts": float(sum(j.restarts for j in self.jobs)),
            "reclaim_preemptions": float(sum(j.reclaim_preemptions for j in self.jobs)),
            "requests": float(self.requests),
            "slo_requests": self.requests_ok / self.requests if self.requests else 1.0,
            "p50_latency_ms": float(np.percentile(lat, 50)) if lat else math.nan,
            "p99_latency_ms": float(np.percentile(lat, 99)) if lat else math.nan,
            "servers_loaned": float(self.servers_loaned),
            "servers_reclaimed": float(self.servers_reclaimed),
            "serving_slots": float(self.serving_slots),
            "wall_s": self.wall_s,
        }


class InferenceSizer:
    """The rate the run provisions each service for in the coming round, under
    ``config.forecast`` (:mod:`faasml.cluster.forecast`, as the simulator's
    ``provision_rate``): ``exact`` reads the coming round's true peak, ``seasonal`` the
    same round's a day earlier (``seasonal-last``: or the last round's, if larger; both
    fall back to ``max``); ``last`` and ``max`` see only the peaks observed between the
    run's own earlier round starts (rounds slip when the driver is busy, so they are not
    ``round_s`` apart: a real manager observes the rounds it had). Times are wall seconds
    since the run began; ``scale`` trace seconds per wall second. No I/O: call
    :meth:`rates` once at the start of every round."""

    def __init__(
        self, services: Sequence[InferenceService], config: RunConfig, scale: float
    ) -> None:
        self.services = list(services)
        self.cfg = config
        self.scale = scale
        self.history: list[list[float]] = [[] for _ in self.services]
        """Each service's observed peak rate of every round so far, oldest first."""
        self._last: float | None = None

    def rates(self, now: float) -> list[float]:
        """Record the round that ended at ``now`` and return each service's rate to
        provision for ``[now, now + round_s)`` (in the trace's requests per second)."""
        cfg, t = self.cfg, now * self.scale
        if self._last is not None and t > self._last:
            for service, seen in zip(self.services, self.history, strict=True):
                seen.append(service.rate.peak_between(self._last, t))
                del seen[: -cfg.forecast_window]  # no forecast looks further back
        self._last = t
        window = cfg.round_s * self.scale
        if cfg.forecast == "exact":
            return [cfg.headroom * s.rate.peak_between(t, t + window) for s in self.services]
        if cfg.forecast.startswith("seasonal"):  # the trace a day ago (the trace's clock)
            past = [seasonal_peak(s.rate, t, window) for s in self.services]
            if cfg.forecast == "seasonal-last":
                past = [
                    None if p is None else max([p, *seen[-1:]])
                    for p, seen in zip(past, self.history, strict=True)
                ]
            return [
                cfg.headroom * p
                if p is not None
                else predict("max", seen, cfg.forecast_window, cfg.headroom)
                for p, seen in zip(past, self.history, strict=True)
            ]
        return [
            predict(cfg.forecast, seen, cfg.forecast_window, cfg.headroom) for seen in self.history
        ]


def route(slots: Sequence[tuple[int, Any, float]], at: float, n: int) -> tuple[Any, float | None]:
    """Where a request sent at ``at`` goes among its service's ``slots`` (server, actor,
    serving from): round-robin (the ``n``-th request) over the slots serving by ``at``;
    if none serves yet, ``(None, t)``: hold it until ``t``, when the first starting one
    does; with no slot at all, ``(None, None)``: nothing serves it (an SLO miss)."""
    ready = [actor for _, actor, since in slots if since <= at]
    if ready:
        return ready[n % len(ready)], None
    if slots:
        return None, min(since for _, _, since in slots)
    return None, None


def _data(seed: int, n: int = 2048) -> tuple[Any, Any]:
    torch = optional_import("torch", "torch")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def _mlp(seed: int) -> Any:
    torch = optional_import("torch", "torch")
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


class TrainWorker:
    """One data-parallel replica of a job: the gradient of its share of each batch."""

    def __init__(self, seed: int, rank: int, replicas: int, batch: int) -> None:
        torch = optional_import("torch", "torch")
        torch.set_num_threads(1)
        self.x, self.y = _data(seed)
        self.model = _mlp(seed)
        self.rank, self.replicas = rank, replicas
        self.share = max(batch // replicas, 1)

    def grad(self, params: list[Any], step: int) -> tuple[list[Any], float]:
        torch = optional_import("torch", "torch")
        with torch.no_grad():
            for p, v in zip(self.model.parameters(), params, strict=True):
                p.copy_(torch.as_tensor(v))
        n = len(self.x)
        start = ((step * self.replicas + self.rank) * self.share) % n
        idx = torch.arange(start, start + self.share) % n
        self.model.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(self.x[idx]), self.y[idx])
        loss.backward()
        return [p.grad.numpy().copy() for p in self.model.parameters()], float(loss)


class InferenceWorker:
    """A warm serving slot on one GPU of a server: every service's small model loaded, a
    forward pass of the service's model per request (the slot serves the service it is
    given to this round)."""

    def __init__(self, seeds: list[int]) -> None:
        torch = optional_import("torch", "torch")
        torch.set_num_threads(1)
        self.models = [_mlp(seed).eval() for seed in seeds]

    def infer(self, service: int, x: Any) -> float:
        torch = optional_import("torch", "torch")
        with torch.no_grad():
            return float(self.models[service](torch.as_tensor(x)).sum())


class _RealJob:
    """A training job's state in the driver (the parameter server) and its workers."""

    def __init__(self, job: Job, seed: int, steps: int, batch: int, ckpt: Path) -> None:
        torch = optional_import("torch", "torch")
        self.job = job
        self.seed = seed
        self.work = steps
        self.batch = batch
        self.model = _mlp(seed)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.ckpt = ckpt
        self.placement: Placement = ()
        self.workers: list[Any] = []
        self.inflight: Any = None
        self.outcome = JobOutcome(job.name, job.arrival_s)
        # What the simulator's driver tracks for the policy (JobView), kept alike here.
        self.plan: SchedulePlan | None = None
        self.waiting_rounds = 0
        self.gpu_s = 0.0
        self.placed_at: float | None = None

    def unplace(self) -> None:
        """The job stops holding workers: count the time it held them."""
        if self.placed_at is not None:
            self.outcome.running_s += time.monotonic() - self.placed_at
            self.placed_at = None

    def params(self) -> list[Any]:
        return [p.detach().numpy().copy() for p in self.model.parameters()]

    def apply(self, results: list[tuple[list[Any], float]]) -> None:
        torch = optional_import("torch", "torch")
        for i, p in enumerate(self.model.parameters()):
            p.grad = torch.as_tensor(np.mean([r[0][i] for r in results], axis=0))
        self.opt.step()
        loss = float(np.mean([r[1] for r in results]))
        if math.isnan(self.outcome.first_loss):
            self.outcome.first_loss = loss
        self.outcome.last_loss = loss
        self.outcome.steps += 1

    def checkpoint(self) -> None:
        """Write model, optimiser and step to the checkpoint file, then read them back (a
        restart resumes from the file, as on another server)."""
        torch = optional_import("torch", "torch")
        tmp = self.ckpt.with_suffix(".tmp")
        torch.save(
            {
                "model": self.model.state_dict(),
                "opt": self.opt.state_dict(),
                "steps": self.outcome.steps,
            },
            tmp,
        )
        tmp.replace(self.ckpt)
        saved = torch.load(self.ckpt, weights_only=True)
        self.model = _mlp(self.seed)
        self.model.load_state_dict(saved["model"])
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.opt.load_state_dict(saved["opt"])
        self.outcome.steps = int(saved["steps"])
        self.outcome.step_history.append(self.outcome.steps)


@dataclass
class _Request:
    service: int
    sent: float
    """When the request arrived (its latency counts from here)."""
    ref: Any


class RayRunner:
    """Drives one real run (module docstring); use :func:`run_on_ray`."""

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
            _RealJob(j, config.seed + i, config.steps, config.batch, workdir / f"{i}.pt")
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
    def _start(self, rj: _RealJob, placement: Placement, now: float) -> None:
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

    def _stop(self, rj: _RealJob) -> None:
        """Finish the step in flight, checkpoint, stop the workers."""
        if rj.inflight is not None:
            self._apply(rj, self.ray.get(rj.inflight))
            rj.inflight = None
        rj.checkpoint()
        for w in rj.workers:
            self.ray.kill(w)
        rj.workers = []
        rj.unplace()

    def _apply(self, rj: _RealJob, results: list[tuple[list[Any], float]]) -> None:
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
        rj = _RealJob(job, self.cfg.seed, 1 << 30, self.cfg.batch, self.workdir / "cal.pt")
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

    def _step(self, rj: _RealJob) -> None:
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
        cfg, ray = self.cfg, self.ray
        self.warm_up()
        calibration = self.calibrate(calibrate) if calibrate else None
        t0 = self._t0 = time.monotonic()
        pending = sorted(self.jobs, key=lambda r: r.job.arrival_s)
        active: list[_RealJob] = []
        done: list[_RealJob] = []
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
            training: Cluster | None = self.cluster
            ids = tuple(range(len(self.cluster.servers)))
            if self.manager is not None:
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
                ids = tuple(
                    s.id for s in self.cluster.servers if s.id not in self.manager.inference
                )
                servers = tuple(
                    Server(i, self.cluster.servers[g].gpus, self.cluster.servers[g].switch)
                    for i, g in enumerate(ids)
                )
                training = Cluster(servers) if servers else None
            local = {g: i for i, g in enumerate(ids)}
            if active:
                # As the simulator's driver does: the policy sees the training VC, and with
                # no training server left every job stops.
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
            self._serve_round(active, t0, now + cfg.round_s)
            for r in list(active):
                if r.outcome.steps >= r.work:
                    for w in r.workers:
                        ray.kill(w)
                    r.workers, r.placement = [], ()
                    active.remove(r)
                    done.append(r)
        for r in active:
            if r.workers:
                self._stop(r)
        self._drain(t0, final=True)
        for actors in self.slots.values():
            for a in actors:
                ray.kill(a)
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
        r: _RealJob,
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

    def _serve_round(self, active: list[_RealJob], t0: float, end: float) -> None:
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


def run_on_ray(
    jobs: Sequence[Job],
    models: Mapping[str, AppModel],
    cluster: Cluster,
    policy: ClusterPolicy,
    config: RunConfig | None = None,
    services: Sequence[InferenceService] = (),
    calibrate: Sequence[Placement] = (),
) -> RunResult:
    """Start a local Ray cluster (a head and one node per server), run, shut it down.
    With ``calibrate`` placements, first measure step and restart times on them
    (:meth:`RayRunner.calibrate`, for :mod:`faasml.cluster.ray_predict`).
    Node ``i`` has ``server<i>`` (its GPUs, for training workers) and ``serve<i>`` (a warm
    serving slot per GPU) resources. Ray's own defaults for addresses are kept: Ray 2.x's
    GCS and raylets listen on every interface whatever ``node_ip_address`` says, and
    ``ray.init`` rewrites a 127.0.0.1 address to the machine's (docs/cluster.md)."""
    ray = optional_import("ray", "ray")
    cluster_utils = optional_import("ray.cluster_utils", "ray")
    config = config or RunConfig()
    nodes = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args=local_head_args(1),
    )
    try:
        for server in cluster.servers:
            nodes.add_node(
                num_cpus=1,
                resources={f"server{server.id}": server.gpus, f"serve{server.id}": server.gpus},
            )
        nodes.wait_for_nodes()
        ray.init(
            address=nodes.address,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        with tempfile.TemporaryDirectory(prefix="faasml-ckpt-") as workdir:
            runner = RayRunner(ray, jobs, models, cluster, policy, config, services, Path(workdir))
            return runner.run(calibrate)
    finally:
        ray.shutdown()
        nodes.shutdown()
