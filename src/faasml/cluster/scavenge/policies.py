"""Scavenging policies, by name: how the idle nodes are split among the running jobs.

- ``malletrain``: the MILP (:mod:`.allocator`) on curves the Job Profiling Advisor measures
  online (inverse order) and the Job Monitor refines; no prior information.
- ``freetrain``: the same MILP told each job's true measured scalability (an oracle bound).
- ``freetrain-guess``: the same MILP on the guess a FreeTrain user makes without a scaling
  profile: linear scaling from each job's measured one-node rate, up to its max nodes.
- ``greedy``: FCFS, each job takes what it can up to its max.
- ``equal``: the idle nodes split evenly among the running jobs.

A policy is pure: :meth:`ScavengePolicy.allocate` maps the pool size and the running jobs'
views to node counts (and, for malletrain, which jobs start profiling at which counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from faasml.cluster.policies import IDLE_NODES, policy_class
from faasml.cluster.scavenge._records import ScavengeJob
from faasml.cluster.scavenge.allocator import AllocJob, CountAllocation, allocate_counts
from faasml.cluster.scavenge.curves import Curve, PiecewiseCurve, linear_guess
from faasml.cluster.scavenge.jpa import JobMonitor, inverse_order, settled


@dataclass(frozen=True)
class JobView:
    """A running job as a policy sees it: its spec, the nodes it holds, whether it is in the
    middle of profiling (then its count is not the policy's to change) and when it was last
    interrupted (rescaled or preempted)."""

    spec: ScavengeJob
    current: int
    profiling: bool = False
    last_interrupt_s: float = 0.0


@dataclass(frozen=True)
class Decision:
    """Counts per running job; ``profile`` names jobs that start profiling now, with the
    counts to measure (largest first: ``counts[job]`` is the first); ``solve`` is the MILP's
    result when one ran."""

    counts: dict[str, int]
    profile: dict[str, tuple[int, ...]] = field(default_factory=dict)
    solve: CountAllocation | None = None


@dataclass
class ScavengePolicy:
    """Base: the MILP on the curve :meth:`curve_for` gives; subclasses change the curve or
    the whole decision."""

    window_s: float = 600.0
    metric: str = "throughput"
    time_limit_s: float = 1.0
    name: str = "base"

    def curve_for(self, spec: ScavengeJob) -> Curve:
        raise NotImplementedError

    def observe(self, job: str, nodes: int, samples_per_s: float) -> None:
        """A Job Monitor record: ``job`` ran at ``samples_per_s`` on ``nodes``."""

    def profile_more(self, job: str) -> bool:
        """Whether ``job``'s profiling should go on to its next (smaller) count."""
        return True

    def _milp(self, pool: int, views: Sequence[JobView], fixed: dict[str, int]) -> Decision:
        free = pool - sum(fixed.values())
        alloc = [
            AllocJob(
                v.spec.job,
                v.current,
                v.spec.min_nodes,
                v.spec.max_nodes,
                v.spec.scale_up_s,
                v.spec.scale_down_s,
                self.curve_for(v.spec),
            )
            for v in views
            if v.spec.job not in fixed
        ]
        solve = allocate_counts(
            alloc,
            max(free, 0),
            window_s=self.window_s,
            metric=self.metric,
            time_limit_s=self.time_limit_s,
        )
        return Decision({**fixed, **solve.counts}, solve=solve)

    def allocate(self, now: float, pool: int, views: Sequence[JobView]) -> Decision:
        fixed = {v.spec.job: v.current for v in views if v.profiling}
        return self._milp(pool, views, fixed)


@dataclass
class FreeTrainPolicy(ScavengePolicy):
    """The MILP on the true measured curves (oracle)."""

    name: str = "freetrain"

    def curve_for(self, spec: ScavengeJob) -> Curve:
        return PiecewiseCurve(tuple(map(float, spec.nodes)), spec.samples_per_s)


@dataclass
class FreeTrainGuessPolicy(ScavengePolicy):
    """The MILP on a user's guess: linear from the one-node rate."""

    name: str = "freetrain-guess"

    def curve_for(self, spec: ScavengeJob) -> Curve:
        return linear_guess(spec.nodes, spec.samples_per_s)


@dataclass
class MalleTrainPolicy(ScavengePolicy):
    """The MILP on JPA-profiled, monitor-refined curves (MalleTrain §3.1.3).

    A job with no measurement yet is profiled on its first allocation: it takes the free
    nodes and, if they are short of its max, nodes of up to ``donors`` donor jobs (1: the
    chapter's one job at a time; the least recently interrupted first, never below a
    donor's min), up to its max; then measures at counts
    in inverse order, stopping early (``early_stop``) once two counts give a valid Amdahl law
    or, from three on, the curve fitted to the earlier counts predicts the latest within 5 %
    (``profile_points``: the fewest counts measured, 2; 3 always checks the law on a third
    count). With ``stop_when_spare`` profiling also stops, after its first count, whenever
    the latest allocation left idle nodes: the nodes a step down releases would find no
    taker (every other job is at its max or not worth a rescale), so the step costs the
    job its throughput and a scale-up back for information the allocator does not need
    now; the Job Monitor records the smaller counts when the allocator shrinks the job.
    A job that cannot get its min nodes waits."""

    name: str = "malletrain"
    monitors: dict[str, JobMonitor] = field(default_factory=dict)
    early_stop: bool = True
    profile_points: int = 2
    donors: int = 1
    stop_when_spare: bool = True
    _spare: int = field(default=0, init=False, repr=False)

    def _monitor(self, job: str) -> JobMonitor:
        return self.monitors.setdefault(job, JobMonitor())

    def curve_for(self, spec: ScavengeJob) -> Curve:
        return self._monitor(spec.job).curve()

    def observe(self, job: str, nodes: int, samples_per_s: float) -> None:
        self._monitor(job).record(nodes, samples_per_s)

    def profile_more(self, job: str) -> bool:
        if not self.early_stop:
            return True
        if self.stop_when_spare and self._spare > 0 and self._monitor(job).known():
            return False
        return not settled(self._monitor(job).points, least=self.profile_points)

    def allocate(self, now: float, pool: int, views: Sequence[JobView]) -> Decision:
        fixed = {v.spec.job: v.current for v in views if v.profiling}
        fresh = [v for v in views if not v.profiling and not self._monitor(v.spec.job).known()]
        known = [v for v in views if not v.profiling and self._monitor(v.spec.job).known()]
        held = sum(v.current for v in known) + sum(v.current for v in fresh)
        free = pool - sum(fixed.values()) - held
        profile: dict[str, tuple[int, ...]] = {}
        donors = sorted(
            (v for v in known if v.current > v.spec.min_nodes),
            key=lambda v: (v.last_interrupt_s, v.spec.submit_s),
        )
        for view in fresh:
            spec = view.spec
            own = view.current + max(free, 0)
            # Donors in LRU order, as many as ``donors`` allows, while short of the max.
            lent: list[tuple[JobView, int]] = []
            short = spec.max_nodes - own
            for donor in donors[: self.donors]:
                if short <= 0:
                    break
                give = min(donor.current - donor.spec.min_nodes, short)
                lent.append((donor, give))
                short -= give
            top = min(spec.max_nodes, own + sum(give for _, give in lent))
            if top < spec.min_nodes:
                fixed[spec.job] = 0
                free += view.current
                continue
            for donor, give in lent:
                fixed[donor.spec.job] = donor.current - give
                known = [v for v in known if v is not donor]
                donors.remove(donor)
            free = own + sum(give for _, give in lent) - top
            profile[spec.job] = inverse_order(top, spec.min_nodes)
            fixed[spec.job] = top
        decision = self._milp(pool, [*known, *(v for v in views if v.spec.job in fixed)], fixed)
        self._spare = pool - sum(decision.counts.values())
        return Decision(decision.counts, profile, decision.solve)


@dataclass
class GreedyPolicy(ScavengePolicy):
    """FCFS: each job in arrival order takes what is left, up to its max (0 below its min)."""

    name: str = "greedy"

    def allocate(self, now: float, pool: int, views: Sequence[JobView]) -> Decision:
        left = pool
        counts: dict[str, int] = {}
        for v in sorted(views, key=lambda v: (v.spec.submit_s, v.spec.line)):
            n = min(v.spec.max_nodes, left)
            counts[v.spec.job] = n if n >= v.spec.min_nodes else 0
            left -= counts[v.spec.job]
        return Decision(counts)


@dataclass
class EqualPolicy(ScavengePolicy):
    """The pool split evenly (water-filling within each job's min/max; jobs whose min the
    share cannot meet get nothing, latest arrivals first)."""

    name: str = "equal"

    def allocate(self, now: float, pool: int, views: Sequence[JobView]) -> Decision:
        order = sorted(views, key=lambda v: (v.spec.submit_s, v.spec.line))
        while order and sum(v.spec.min_nodes for v in order) > pool:
            order.pop()
        counts = {v.spec.job: 0 for v in views}
        active = list(order)
        left = pool
        while active and left > 0:
            share = left // len(active)
            extra = left - share * len(active)
            done = []
            for i, v in enumerate(active):
                want = share + (1 if i < extra else 0)
                have = counts[v.spec.job]
                give = min(want, v.spec.max_nodes - have)
                counts[v.spec.job] = have + give
                left -= give
                if counts[v.spec.job] >= v.spec.max_nodes:
                    done.append(v)
            if not done and share == 0:
                break
            active = [v for v in active if v not in done]
        for v in order:  # a share below min only happens when min > 1: lift to min
            if 0 < counts[v.spec.job] < v.spec.min_nodes:
                counts[v.spec.job] = 0
        return Decision(counts)


def make_scavenge_policy(
    name: str, *, window_s: float = 600.0, metric: str = "throughput", time_limit_s: float = 1.0
) -> ScavengePolicy:
    """A fresh idle-nodes policy by name, from the cluster policies' registry
    (:data:`faasml.cluster.policies.POLICIES`); an unknown name lists the choices."""
    cls = policy_class(name, IDLE_NODES)
    policy = cls(window_s=window_s, metric=metric, time_limit_s=time_limit_s)
    assert isinstance(policy, ScavengePolicy)
    return policy
