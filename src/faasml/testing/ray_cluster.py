"""A multi-node Ray cluster on this machine, for tests and benchmarks (``ray`` extra)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from faasml._imports import optional_import
from faasml._ray_config import local_head_args


@contextmanager
def local_ray_cluster(
    nodes: int = 2, cpus_per_node: int = 2, gpus_per_node: int = 0
) -> Iterator[Any]:
    """Start a head and ``nodes - 1`` more Ray nodes (no dashboard), connect this process to
    them, and shut everything down on exit. Yields the ``ray.cluster_utils.Cluster``.
    ``gpus_per_node`` declares GPUs to Ray (it schedules them whether or not they exist)."""
    ray = optional_import("ray", "ray")
    cluster_utils = optional_import("ray.cluster_utils", "ray")
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={**local_head_args(cpus_per_node), "num_gpus": gpus_per_node},
    )
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node, num_gpus=gpus_per_node)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
