"""A local multi-node Ray cluster that stands for the GPU servers, for one real run."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from faasml._imports import optional_import
from faasml._ray_config import local_head_args
from faasml.cluster.goodput import AppModel
from faasml.cluster.inference import InferenceService
from faasml.cluster.plain import Cluster, Job, Placement
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.ray_run.config import RunConfig
from faasml.cluster.ray_run.outcomes import RunResult
from faasml.cluster.ray_run.runner import RayRunner


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
