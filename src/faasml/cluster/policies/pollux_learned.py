"""Pollux as users run it: a throughput model fitted online from what jobs report.

The oracle ``pollux`` policy plans on the true goodput of the traces. Pollux (Qiao et al.,
OSDI 2021, §3.1) instead fits each job's throughput model to the step times the job measures
on the allocations it has run on, and (§4.2) weighs restarts:

- **Throughput model** (§3.1, with the compute and synchronisation times added, as in our
  simulator, γ = 1): ``T_iter = T_grad(m) + T_sync(placement)`` with ``T_grad = α_g + β_g·m``
  (``m`` the atomic local batch), ``T_sync = α_r + β_r·(r − 1)`` on one server (r GPUs) and
  ``α_n + β_n·(N − 1)`` over N servers, each fitted by least squares (slopes ≥ 0) to the
  job's reports (``JobView.observed``). Unobserved terms take Pollux's optimistic priors: no
  multi-GPU report, no synchronisation; no multi-server report, the one-server fit.
- **Exploration limit** (Pollux §4.2 / the artifact): a job may get at most twice the GPUs
  it has reported on (one before its first report), so an optimistic prior is tested
  step by step.
- **Statistical efficiency**: the job reports its gradient noise scale (Pollux measures it
  online), so the efficiency term is the true one of its current epoch.
- **Re-allocation factor** (Pollux §4.2): an allocation that differs from the job's current
  one has its speedup scaled by ``(T − S·δ) / (T + δ)``, with T the job's age, S its restarts
  so far and δ the restart overhead, so restarts are a cost the scheduler weighs.

Batch sizes are then co-adapted on the true model by the simulator (the agent's batch
choice is not learned here), so what differs from the oracle is which allocations are chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from faasml.cluster.goodput import AppModel, efficiency
from faasml.cluster.plain import Job, Layout, Observation, packed_layout
from faasml.cluster.policies._base import FloatArray, by_arrival, greedy_grow, place
from faasml.cluster.policies.pollux import PolluxPolicy
from faasml.cluster.records import Cluster, ClusterAllocation, Decision, JobView


@dataclass(frozen=True)
class ThroughputParams:
    """Fitted coefficients of Pollux's throughput model (seconds)."""

    grad0: float
    grad1: float
    single: float
    intra0: float
    intra1: float
    inter0: float
    inter1: float

    def iteration(self, layout: Layout, bsz: FloatArray, accum: FloatArray) -> FloatArray:
        """Predicted time of one iteration (with ``accum`` extra accumulation steps)."""
        grad = self.grad0 + self.grad1 * bsz
        if layout.gpus <= 1:
            sync = self.single
        elif layout.nodes == 1:
            sync = self.intra0 + self.intra1 * (layout.gpus - 1)
        else:
            sync = self.inter0 + self.inter1 * (layout.nodes - 1)
        sync = max(sync, 0.0)
        return np.asarray(grad + sync + accum * grad, dtype=np.float64)


def _line(x: FloatArray, y: FloatArray) -> tuple[float, float] | None:
    """Least-squares intercept and slope (slope ≥ 0); None without data."""
    if len(x) == 0:
        return None
    if len(np.unique(x)) < 2:
        return float(np.mean(y)), 0.0
    slope, icpt = np.polyfit(x, y, 1)
    if slope < 0:
        return float(np.mean(y)), 0.0
    return float(icpt), float(slope)


@lru_cache(maxsize=65536)
def fit_throughput(observed: tuple[Observation, ...]) -> ThroughputParams | None:
    """Pollux §3.1's fit to a job's reports; None before its first report."""
    if not observed:
        return None
    gpus = np.array([sum(o.counts) for o in observed], dtype=np.float64)
    nodes = np.array([len(o.counts) for o in observed], dtype=np.float64)
    bsz = np.array([o.atomic_bsz for o in observed], dtype=np.float64)
    step = np.array([o.step_s for o in observed])
    sync = np.array([o.sync_s for o in observed])
    grad = _line(bsz, step - sync)
    assert grad is not None
    g0, g1 = grad
    if g1 == 0.0 and len(np.unique(bsz)) < 2:  # one batch size: proportional to it
        g0, g1 = 0.0, g0 / max(float(bsz[0]), 1.0)
    one = sync[gpus <= 1]
    single = float(np.median(one)) if len(one) else 0.0
    intra = _line(gpus[(nodes == 1) & (gpus > 1)] - 1, sync[(nodes == 1) & (gpus > 1)])
    i0, i1 = intra if intra is not None else (single, 0.0)
    inter = _line(nodes[nodes > 1] - 1, sync[nodes > 1])
    e0, e1 = inter if inter is not None else (i0, i1)
    return ThroughputParams(g0, g1, single, i0, i1, e0, e1)


@lru_cache(maxsize=4096)
def _grid(
    model: AppModel, job: Job, top: int, gpus_per_server: int, servers_per_switch: int
) -> tuple[FloatArray, ...]:
    """Batch candidates of every GPU count 1..top (packed), concatenated: atomic batch,
    accumulation steps, global batch, GPUs, servers, and each count's first index."""
    parts: list[list[FloatArray]] = [[], [], [], [], []]
    starts, offset = [], 0
    for n in range(1, top + 1):
        layout = packed_layout(n, gpus_per_server, servers_per_switch)
        bsz, accum, batch, _ = model.candidates(layout, job, adaptive=True)
        for i, array in enumerate(
            (bsz, accum, batch, np.full_like(bsz, n), np.full_like(bsz, layout.nodes))
        ):
            parts[i].append(array)
        starts.append(offset)
        offset += len(bsz)
    out = (*(np.concatenate(p) for p in parts), np.array(starts, dtype=np.float64))
    for array in out:
        array.setflags(write=False)
    return out


@lru_cache(maxsize=65536)
def learned_curve(
    model: AppModel,
    job: Job,
    epoch: int,
    top: int,
    gpus_per_server: int,
    servers_per_switch: int,
    params: ThroughputParams,
) -> FloatArray:
    """Goodput by GPU count (packed) under the fitted throughput model and the job's
    reported efficiency; the batch is co-adapted per count as Pollux does."""
    out = np.zeros(top + 1)
    if top >= 1:
        bsz, accum, batch, gpus, nodes, starts = _grid(
            model, job, top, gpus_per_server, servers_per_switch
        )
        grad = params.grad0 + params.grad1 * bsz
        sync = np.where(
            gpus <= 1,
            params.single,
            np.where(
                nodes <= 1,
                params.intra0 + params.intra1 * (gpus - 1),
                params.inter0 + params.inter1 * (nodes - 1),
            ),
        )
        iteration = grad * (1 + accum) + np.maximum(sync, 0.0)
        sqr, var = model.grad_stats(batch, epoch)
        good = efficiency(sqr, var, batch, model.init_batch) * (batch / model.init_batch)
        out[1:] = np.maximum.reduceat(good / iteration, starts.astype(np.intp))
    out.setflags(write=False)
    return out


class PolluxLearnedPolicy(PolluxPolicy):
    """Pollux's fitness maximiser on a throughput model learned online (module docstring)."""

    name = "pollux-learned"
    adaptive = True

    def limit(self, view: JobView) -> int:
        """Exploration limit: twice the most GPUs the job has reported on (1 before)."""
        seen = max((sum(o.counts) for o in view.observed), default=0)
        return max(2 * seen, 1)

    def curve(self, view: JobView, cluster: Cluster) -> FloatArray:
        top = min(view.max_gpus, cluster.total_gpus, self.limit(view))
        params = fit_throughput(view.observed)
        if params is None:  # nothing reported yet: one GPU, to be measured
            out = np.zeros(top + 1)
            out[1:] = 1.0
            return out
        return learned_curve(
            view.model,
            _key(view.job.application, view.job.min_batch, view.job.max_batch),
            view.model.epoch_of(view.progress),
            top,
            cluster.gpus_per_server,
            cluster.servers_per_switch,
            params,
        )

    def realloc_factor(self, view: JobView, now: float) -> float:
        """Pollux §4.2: ``(T − S·δ) / (T + δ)`` for a job of age T with S restarts."""
        age = max(now - view.job.arrival_s, 0.0)
        delta = self.restart_s
        if age + delta <= 0:
            return 1.0
        return max((age - view.restarts * delta) / (age + delta), 0.0)

    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        total = cluster.total_gpus
        ordered = by_arrival(jobs)[:total]
        counts = {v.name: 1 for v in ordered}
        curves: dict[str, FloatArray] = {}
        value: dict[str, Callable[[float], float]] = {}
        for v in ordered:
            curve = np.array(self.curve(v, cluster))
            value[v.name] = self.value(v, curve.copy())  # speedup over the unpenalised base
            held = len(current.get(v.name, ()))
            if held:
                # Any allocation but the current one pays a restart (Pollux §4.2).
                keep = curve[held] if held < len(curve) else None
                curve *= self.realloc_factor(v, now)
                if keep is not None:
                    curve[held] = keep
            curves[v.name] = curve
        span = max([cluster.gpus_per_server, *(len(current.get(v.name, ())) for v in ordered)])
        grown = greedy_grow(counts, curves, total - len(ordered), value, span)
        return Decision(place(grown, cluster, current))


@lru_cache(maxsize=4096)
def _key(application: str, min_batch: int | None, max_batch: int | None) -> Job:
    """One shared key job per batch setting (the curves depend on nothing else of a job)."""
    return Job("~", application, 0.0, 1, 1, 1, None, min_batch, max_batch)
