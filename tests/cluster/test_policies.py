from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from faasml.cluster import AppModel, Cluster, Job, JobView, make_policy
from faasml.cluster.policies import GPU_POOL, POLICIES
from faasml.cluster.policies.elasticflow import minimum_share
from faasml.cluster.policies.fapes import FapesPolicy
from faasml.cluster.records import check_allocation
from faasml.exceptions import ConfigError, UnknownNameError

from .reference_planning import ReferenceFapes

APPS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")


def views(models: dict[str, AppModel], seed: int, count: int) -> list[JobView]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        app = APPS[int(rng.integers(len(APPS)))]
        model = models[app]
        job = Job(f"j{i}", app, float(i), int(rng.integers(1, 9)), model.init_batch * 2)
        work = model.work(job)
        out.append(JobView(job, model, float(rng.uniform(0, 0.5)) * work, work))
    return out


@pytest.mark.parametrize("name", POLICIES.names(GPU_POOL))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_policy_returns_a_valid_allocation(
    models: dict[str, AppModel], name: str, seed: int
) -> None:
    cluster = Cluster.uniform(4, 4, 2)
    policy = make_policy(name)
    jobs = views(models, seed, 6 + 4 * seed)
    current: dict[str, tuple[int, ...]] = {}
    for now in (0.0, 60.0, 120.0):
        decision = policy.allocate(jobs, cluster, current, now)
        check_allocation(decision.allocation, cluster, jobs)
        for v in jobs:
            assert len(decision.allocation.get(v.name, ())) <= v.max_gpus
        if name != "fifo":  # FIFO may idle GPUs behind a blocked head
            assert sum(len(p) for p in decision.allocation.values()) > 0
        current = {k: v for k, v in decision.allocation.items() if v}
        jobs = [
            JobView(
                v.job,
                v.model,
                v.progress,
                v.work,
                current.get(v.name, ()),
                started=v.started or bool(current.get(v.name)),
                plan=decision.plans.get(v.name, v.plan),
            )
            for v in jobs
        ]


def test_unknown_policy_lists_the_choices() -> None:
    with pytest.raises(UnknownNameError, match="choose one of: elasticflow, fapes, fifo"):
        make_policy("tiresias")


def test_fifo_blocks_behind_the_head_but_sjf_backfills(models: dict[str, AppModel]) -> None:
    cluster = Cluster.uniform(2, 4)
    m = models["cifar10"]
    big = Job("big", "cifar10", 0.0, 8, 512)
    small = Job("small", "cifar10", 1.0, 2, 512)
    running = Job("run", "cifar10", 0.0, 2, 512)
    jobs = [
        JobView(running, m, 0.0, m.work(running), (0, 0), started=True),
        JobView(big, m, 0.0, m.work(big)),
        JobView(small, m, 0.0, m.work(small)),
    ]
    fifo = make_policy("fifo").allocate(jobs, cluster, {"run": (0, 0)}, 0.0).allocation
    assert set(fifo) == {"run"}
    sjf = make_policy("sjf").allocate(jobs, cluster, {"run": (0, 0)}, 0.0).allocation
    assert set(sjf) == {"run", "small"} and fifo["run"] == sjf["run"] == (0, 0)


def test_optimus_and_pollux_start_every_job_when_gpus_suffice(
    models: dict[str, AppModel],
) -> None:
    cluster = Cluster.uniform(4, 4)
    jobs = views(models, 5, 10)
    for name in ("optimus", "pollux"):
        alloc = make_policy(name).allocate(jobs, cluster, {}, 0.0).allocation
        assert all(len(alloc.get(v.name, ())) >= 1 for v in jobs), name
        assert sum(len(p) for p in alloc.values()) == 16


def test_elasticflow_minimum_share_meets_the_deadline() -> None:
    curve = np.array([0.0, 1.0, 1.9, 2.7, 3.4])
    assert minimum_share(curve, 100.0, 40.0) == 3  # needs 2.5 per second
    assert minimum_share(curve, 100.0, 10.0) is None
    assert minimum_share(curve, 100.0, 0.0) is None


def test_elasticflow_admits_deadline_jobs_with_their_minimum_share(
    models: dict[str, AppModel],
) -> None:
    cluster = Cluster.uniform(4, 4)
    m = models["bert"]
    probe = Job("p", "bert", 0.0, 1, 96)
    work = m.work(probe)
    curve = m.goodput_curve(probe, 0.0, 16, 4, 4, adaptive=False)
    deadline = work / float(curve[4]) * 1.05 + 60.0
    tight = Job("tight", "bert", 0.0, 1, 96, deadline_s=deadline)
    view = JobView(tight, m, 0.0, work)
    alloc = make_policy("elasticflow").allocate([view], cluster, {}, 0.0).allocation
    assert len(alloc["tight"]) >= minimum_share(curve, work, deadline - 60.0)  # type: ignore[operator]


def test_fapes_plans_go_on_the_board_and_fill_the_cluster(
    models: dict[str, AppModel],
) -> None:
    cluster = Cluster.uniform(4, 4)
    jobs = views(models, 3, 3)
    decision = make_policy("fapes").allocate(jobs, cluster, {}, 0.0)
    assert set(decision.plans) == {v.name for v in jobs}
    for name, plan in decision.plans.items():
        assert plan.segments[0].start == 0
        planned = Counter(plan.placement_at(0))
        # the plan's GPUs are kept; back-filling may add GPUs no plan uses this round
        assert planned <= Counter(decision.allocation[name])
        assert 0.0 < plan.achievement <= 1.0 + 1e-9
    assert sum(len(p) for p in decision.allocation.values()) >= 8


def test_fapes_backfills_gpus_no_plan_uses_now(models: dict[str, AppModel]) -> None:
    cluster = Cluster.uniform(4, 4)
    jobs = views(models, 3, 3)
    with_fill = make_policy("fapes").allocate(jobs, cluster, {}, 0.0).allocation
    without = FapesPolicy(backfill=False).allocate(jobs, cluster, {}, 0.0).allocation
    used = sum(len(p) for p in without.values())
    assert used <= sum(len(p) for p in with_fill.values()) <= cluster.total_gpus
    check_allocation(with_fill, cluster, jobs)
    for name, placement in without.items():
        assert Counter(placement) <= Counter(with_fill[name])


@pytest.mark.parametrize("kwargs", [{"srpt": -1.0}, {"min_gain": -0.1}, {"slots": 0}])
def test_fapes_rejects_bad_settings_naming_the_value(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match=str(next(iter(kwargs)))):
        FapesPolicy(**kwargs)  # type: ignore[arg-type]


def test_fapes_gives_the_shorter_of_two_like_jobs_at_least_as_many_gpus(
    models: dict[str, AppModel],
) -> None:
    cluster = Cluster.uniform(2, 4)
    model = models["cifar10"]
    jobs = []
    for name, left in (("long", 1.0), ("short", 0.2)):
        job = Job(name, "cifar10", 0.0, 1, model.init_batch)
        work = model.work(job)
        jobs.append(JobView(job, model, work * (1.0 - left), work))
    alloc = make_policy("fapes").allocate(jobs, cluster, {}, 0.0).allocation
    assert len(alloc.get("short", ())) >= len(alloc.get("long", ()))


@pytest.mark.parametrize("seed", range(4))
def test_fapes_filtering_matches_the_one_depth_at_a_time_reference(
    models: dict[str, AppModel], seed: int
) -> None:
    """FaPES's vectorised filtering (every recycling depth at once) decides exactly as the
    loop it replaced, over rounds where jobs progress, leave and arrive."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.uniform(12, 4, 3)
    jobs = views(models, seed, 30)
    fast, slow = FapesPolicy(), ReferenceFapes()
    current: dict[str, tuple[int, ...]] = {}
    recycled = 0
    for r in range(6):
        got = fast.allocate(jobs, cluster, current, 60.0 * r)
        want = slow.allocate(jobs, cluster, current, 60.0 * r)
        assert got == want
        recycled += sum(1 for n, p in got.allocation.items() if current.get(n, p) != p)
        current = {n: p for n, p in got.allocation.items() if p}
        following = []
        for i, v in enumerate(jobs):
            progress = v.progress + (
                float(rng.uniform(0.01, 0.05)) * v.work if v.name in current else 0.0
            )
            if progress >= v.work or rng.random() < 0.1:
                current.pop(v.name, None)
                v = views(models, seed * 100 + r * 10 + i, 1)[0]
                v = JobView(replace(v.job, name=f"n{r}-{i}"), v.model, 0.0, v.work)
                following.append(v)
                continue
            following.append(
                JobView(
                    v.job,
                    v.model,
                    progress,
                    v.work,
                    current.get(v.name, ()),
                    started=v.started or v.name in current,
                    waiting_rounds=0 if v.name in current else v.waiting_rounds + 1,
                    plan=got.plans.get(v.name, v.plan),
                )
            )
        jobs = following
    assert recycled > 0
