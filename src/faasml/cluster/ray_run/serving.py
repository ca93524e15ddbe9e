"""The real run's :class:`~faasml.cluster.pool.Serving`: warm serving slots that answer real
requests sent at the services' trace rates, latencies measured against the SLO."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from faasml.cluster.inference import InferenceService
from faasml.cluster.loans import LoanManager
from faasml.cluster.plain import Cluster
from faasml.cluster.ray_run.config import DAY_S, RunConfig
from faasml.cluster.ray_run.sizing import InferenceSizer, route
from faasml.cluster.ray_run.wall import WallTime
from faasml.cluster.ray_run.workers import InferenceWorker


@dataclass
class _Request:
    service: int
    sent: float
    """When the request arrived, in wall seconds of the run (its latency counts from here)."""
    ref: Any


class RayServing:
    """The services of one real run: sized by :class:`InferenceSizer` each round, given
    their slots by the driver's pool (``assign``), fed requests while the clock passes."""

    def __init__(
        self,
        ray: Any,
        services: Sequence[InferenceService],
        cluster: Cluster,
        config: RunConfig,
        wall: WallTime,
    ) -> None:
        self.ray = ray
        self.services = list(services)
        self.cluster = cluster
        self.cfg = config
        self.wall = wall
        self.infer_cls = ray.remote(num_cpus=0)(InferenceWorker)
        self.scale = DAY_S / config.day_s
        self.sizer = InferenceSizer(self.services, config, self.scale)
        self.infer_workers: list[list[tuple[int, Any, float]]] = [[] for _ in self.services]
        """Each service's serving slots this round: (server, warm actor, serving from)."""
        self.slots: dict[int, list[Any]] = {}
        """Warm serving actors of every server, one per GPU (started before the clock)."""
        self.requests: list[_Request] = []
        self.latencies: list[float] = []
        self.sent = 0
        self.ok = 0
        self._rng = np.random.default_rng(config.seed)
        self._schedule: list[tuple[float, int, float]] = []
        self._scheduled_until = 0.0

    def warm_up(self, manager: LoanManager) -> None:
        """Start one serving actor per GPU of every server that inference may use (at most
        the services' summed ``max_scale`` per server: no server ever serves more) and wait
        until each has answered once, before the clock starts: a serverless platform keeps
        inference containers warm (FaPES §3.3), so the run measures serving, not start-up.
        A slot takes a ``serve<i>`` unit, not a ``server<i>`` (GPU) one: which GPUs serve
        is the driver's accounting (the loan manager's inference VC), as for training."""
        seeds = [100 + i for i in range(len(self.services))]
        servers: Sequence[int] = range(len(self.cluster.servers))
        if manager.mode != "fapes":  # inference never leaves its home servers
            servers = manager.home
        most = sum(s.max_scale for s in self.services)
        for sid in servers:
            self.slots[sid] = [
                self.infer_cls.options(resources={f"serve{sid}": 1}).remote(seeds)
                for _ in range(min(self.cluster.servers[sid].gpus, most))
            ]
        x = np.zeros((1, 16), dtype=np.float32)
        self.ray.get([a.infer.remote(0, x) for actors in self.slots.values() for a in actors])

    # -- the Serving contract -----------------------------------------------------------
    def rates(self, now: float) -> list[float]:
        return self.sizer.rates(now)

    def assign(self, gpus: Sequence[int], servers: frozenset[int], now: float) -> None:
        """Give each service ``gpus[i]`` serving slots on the inference ``servers``, keeping
        the slots it had there (requests in flight on a slot taken away still finish); a
        slot it did not have serves from ``now + inference_start_s``."""
        keep: list[list[tuple[int, Any, float]]] = []
        for i, want in enumerate(gpus):
            keep.append([slot for slot in self.infer_workers[i] if slot[0] in servers][:want])
        taken = {id(slot[1]) for ws in keep for slot in ws}
        free = [
            (s, a) for s in sorted(servers) for a in self.slots.get(s, []) if id(a) not in taken
        ]
        since = now + self.cfg.inference_start_s
        for i, want in enumerate(gpus):
            while len(keep[i]) < want and free:
                server, actor = free.pop(0)
                keep[i].append((server, actor, since))
        self.infer_workers = keep

    # -- while the clock passes ---------------------------------------------------------
    def plan_until(self, end: float) -> None:
        """Draw the requests due before ``end``. Requests arrive on their own clock: those
        due while the driver was busy (rescaling, starting workers) are sent late and
        wait, as real users would."""
        if end > self._scheduled_until:
            self._schedule += self._request_times(self._scheduled_until, end)
            self._schedule.sort()
            self._scheduled_until = end

    def next_due(self) -> float | None:
        return self._schedule[0][0] if self._schedule else None

    def send_due(self, now: float) -> None:
        """Send the requests due by ``now`` to their services' slots (round-robin)."""
        while self._schedule and self._schedule[0][0] <= now:
            _, i, due = self._schedule.pop(0)
            w, later = route(self.infer_workers[i], now, self.sent + 1)
            if later is not None:  # its slots are starting: it waits for the first
                bisect.insort(self._schedule, (later, i, due))
                continue
            self.sent += 1
            if w is None:
                continue  # nothing serves it: an SLO miss
            x = self._rng.standard_normal((1, 16)).astype(np.float32)
            self.requests.append(_Request(i, due, w.infer.remote(i, x)))

    def inflight(self) -> list[Any]:
        return [q.ref for q in self.requests]

    def drain(self, final: bool = False) -> None:
        """Record the latency of every answered request (``final``: wait a while for all)."""
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
                latency = 1000 * (self.wall.elapsed() - q.sent)
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

    def shut_down(self) -> None:
        """Wait for the requests in flight, stop the serving slots."""
        self.drain(final=True)
        for actors in self.slots.values():
            for a in actors:
                self.ray.kill(a)

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
