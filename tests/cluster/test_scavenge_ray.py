"""End to end on a real local multi-node Ray cluster: elastic data-parallel PyTorch jobs driven
by MalleTrain (JPA profiling, MILP) on nodes added and removed by a small idle-node trace;
a removed node kills its worker with no notice and the job resumes from its last checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from faasml._ray_config import local_head_args
from faasml.cluster.scavenge import IdleTrace, PoolChange, ScavengeJob, make_scavenge_policy

ray = pytest.importorskip("ray")
pytest.importorskip("torch")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from faasml.cluster.scavenge.ray_executor import (  # noqa: E402
    ElasticTask,
    RayClusterNodes,
    RayExecutor,
    run_on_ray,
)

pytestmark = pytest.mark.slow


def _job(name: str, submit: float, total: float) -> ScavengeJob:
    # Rough user-side figures; the policy learns the real throughput by profiling.
    return ScavengeJob(name, "mlp", submit, 1, 2, 2.0, 1.0, total, (0, 1, 2), (0.0, 100.0, 190.0))


def test_elastic_jobs_survive_preemption_on_a_ray_cluster(tmp_path: Path) -> None:
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args=local_head_args(0),
    )
    try:
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        # Trace time is training progress (10 steps of any job = 1 s), so that the events
        # land at the same point of the jobs' progress however fast this machine is.
        trace = IdleTrace(
            (
                PoolChange(0.0, frozenset({"n0", "n1"}), frozenset()),
                PoolChange(2.5, frozenset(), frozenset({"n1"})),  # no notice
                PoolChange(3.0, frozenset({"n2"}), frozenset()),
            ),
            frozenset({"n0", "n1", "n2"}),
        )
        # Profiling takes the first 15 steps (A at 2 nodes, then A and B at 1), so by the
        # preemption (25 steps) A has at most 5 × 64 + 5 × 32 + 10 × 64 = 1,120 samples and
        # B at most 5 × 32 + 10 × 64 = 800: neither has finished. Few steps in all: under a
        # CPU hog a step of this test's Ray round trips takes about a second.
        jobs = [_job("A", 0.0, 1_200.0), _job("B", 0.5, 900.0)]
        executor = RayExecutor(tmp_path / "ckpt", checkpoint_every=5)

        def progress() -> float:
            return 0.1 * sum(len(job.losses) for job in executor.jobs.values())

        policy = make_scavenge_policy("malletrain", window_s=60.0)
        result = run_on_ray(
            trace,
            jobs,
            policy,
            RayClusterNodes(cluster),
            executor,
            tasks={"A": ElasticTask(seed=1), "B": ElasticTask(seed=2)},
            measure_s=0.0,  # a measurement is 5 steps, on a fast machine or a slow one
            measure_steps=5,
            timeout_s=400.0,
            clock=progress,
        )
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert not ray.is_initialized()
    done = result.jobs
    for name, job in done.items():
        assert job.finished and job.samples >= job.spec.total_samples, name
        assert job.losses[-1] < job.losses[0], name  # it trained
        assert job.rescales >= 1, name
    # The JPA measured A's real throughput at 2 nodes, then at 1 (inverse order).
    assert done["A"].history[:2] == [(done["A"].history[0][0], 2), (done["A"].history[1][0], 1)]
    assert set(policy.monitors["A"].points) >= {1, 2}  # type: ignore[attr-defined]
    hit = [job for job in done.values() if job.preemptions]
    assert hit, "removing one of two busy nodes preempts a job"
    for job in hit:
        # Resumed from a checkpoint, never from scratch, and lost less than the steps
        # between two checkpoints (at most 2 workers × 32 samples a step).
        assert max(job.resumed_from) > 0
        assert job.lost_samples <= 5 * 2 * 32
