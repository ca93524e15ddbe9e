"""pollux-learned: the throughput model fitted from job reports, exploration, restarts."""

from __future__ import annotations

import numpy as np

from faasml.cluster import AppModel, Cluster, Job, JobView, make_policy
from faasml.cluster.plain import Layout, Observation
from faasml.cluster.policies.pollux_learned import PolluxLearnedPolicy, fit_throughput


def report(model: AppModel, layout: Layout, bsz: int) -> Observation:
    step, sync = model.step_sync(layout, np.array([float(bsz)]))
    return Observation(layout.counts, layout.switches, bsz, 0, float(step[0]), float(sync[0]))


def test_fit_reproduces_reported_step_times(models: dict[str, AppModel]) -> None:
    model = models["cifar10"]
    layouts = [Layout((1,)), Layout((2,)), Layout((4,)), Layout((4, 4)), Layout((4, 4, 4))]
    observed = tuple(report(model, lay, b) for lay in layouts for b in (64, 128))
    params = fit_throughput(observed)
    assert params is not None
    for obs in observed:
        lay = Layout(obs.counts, obs.switches)
        got = params.iteration(lay, np.array([obs.atomic_bsz]), np.array([0.0]))[0]
        assert abs(got - obs.step_s) <= 0.25 * obs.step_s  # a line through the reports
    assert fit_throughput(()) is None


def test_unseen_synchronisation_is_optimistic_until_measured(
    models: dict[str, AppModel],
) -> None:
    model = models["bert"]
    one = fit_throughput((report(model, Layout((1,)), 8), report(model, Layout((1,)), 12)))
    assert one is not None
    assert one.intra0 == one.single and one.inter0 == one.intra0  # Pollux's priors
    two = fit_throughput((report(model, Layout((1,)), 8), report(model, Layout((4, 4)), 8)))
    assert two is not None and two.inter0 > two.single


def view(
    model: AppModel, job: Job, observed: tuple[Observation, ...] = (), **kw: object
) -> JobView:
    return JobView(job, model, 0.0, model.work(job), observed=observed, **kw)  # type: ignore[arg-type]


def test_exploration_limit_doubles_the_gpus_a_job_has_reported_on(
    models: dict[str, AppModel],
) -> None:
    model = models["cifar10"]
    job = Job("a", "cifar10", 0.0, 1, 128)
    cluster = Cluster.uniform(4, 4)
    policy = make_policy("pollux-learned")
    assert isinstance(policy, PolluxLearnedPolicy)
    new = policy.allocate([view(model, job)], cluster, {}, 0.0).allocation
    assert len(new["a"]) == 1  # nothing measured yet: one GPU
    seen = (report(model, Layout((1,)), 128), report(model, Layout((2,)), 64))
    grown = policy.allocate([view(model, job, seen)], cluster, {}, 60.0).allocation
    assert 2 < len(grown["a"]) <= 4


def test_restarts_are_weighed_by_the_reallocation_factor(models: dict[str, AppModel]) -> None:
    model = models["cifar10"]
    job = Job("a", "cifar10", 0.0, 1, 128)
    seen = tuple(report(model, Layout((n,)), 64) for n in (1, 2, 4))
    cheap = make_policy("pollux-learned", restart_s=0.0)
    dear = make_policy("pollux-learned", restart_s=1e6)
    assert isinstance(dear, PolluxLearnedPolicy)
    running = view(model, job, seen, placement=(0, 0), restarts=3)
    assert dear.realloc_factor(running, 600.0) == 0.0
    assert cheap.realloc_factor(running, 600.0) == 1.0
    cluster = Cluster.uniform(4, 4)
    # With restarts this dear, a running job keeps its GPUs; free of charge, it grows.
    assert dear.allocate([running], cluster, {"a": (0, 0)}, 600.0).allocation["a"] == (0, 0)
    assert len(cheap.allocate([running], cluster, {"a": (0, 0)}, 600.0).allocation["a"]) > 2
