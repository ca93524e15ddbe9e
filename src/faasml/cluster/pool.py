"""Inference services and FaPES-Manager loans inside the cluster driver (one code path for the
trace-driven simulator and the real run on Ray).

Every round the services are sized first (SLO first) for the rate their :class:`Serving`
provisions for the coming round, the manager moves servers between the virtual clusters
(loans and reclaims, :mod:`faasml.cluster.loans`), and training sees only the training VC.
Where the services run is the ``Serving``'s: :class:`ModeledServing` (the simulator's:
rates from the traces under ``SimConfig.forecast``, nothing to start) or the real run's
serving slots. Either way the requests above what was provisioned are tallied as SLO misses
against the trace (``ServiceTally``): the modelled attainment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from faasml.cluster.executor import JobState
from faasml.cluster.forecast import provision_rate
from faasml.cluster.inference import InferenceService, ServiceTally
from faasml.cluster.loans import LoanManager, reserve_servers, serve_first
from faasml.cluster.plain import Cluster, Placement, Server
from faasml.cluster.sim_config import SimConfig


class Serving(Protocol):
    """Where the services' workers run: the rate each is provisioned for in the round that
    starts at ``now``, and the GPUs and inference servers they then get."""

    def rates(self, now: float) -> Sequence[float]: ...

    def assign(self, gpus: Sequence[int], servers: frozenset[int], now: float) -> None: ...


class ModeledServing:
    """The simulator's serving: each service's rate from its trace under ``cfg.forecast``
    (:func:`~faasml.cluster.forecast.provision_rate`); no worker to start."""

    def __init__(self, services: Sequence[InferenceService], cfg: SimConfig) -> None:
        self.services = services
        self.cfg = cfg

    def rates(self, now: float) -> list[float]:
        cfg = self.cfg
        return [
            provision_rate(
                s.rate, now, cfg.round_s, cfg.forecast, cfg.forecast_window, cfg.headroom
            )
            for s in self.services
        ]

    def assign(self, gpus: Sequence[int], servers: frozenset[int], now: float) -> None:
        """Nothing runs: the tally models the service."""


class InferencePool:
    """The services and FaPES-Manager of one driver run (module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        services: Sequence[InferenceService],
        cfg: SimConfig,
        serving: Serving | None = None,
    ) -> None:
        self.cluster = cluster
        self.services = services
        self.cfg = cfg
        self.serving: Serving = serving or ModeledServing(services, cfg)
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
        rates = self.serving.rates(now)
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
        self.serving.assign(self.gpus, event.inference, now)
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
