"""Settings for the local Ray clusters faasml starts (its tests, `faasml cluster run`)."""

from __future__ import annotations

from typing import Any

LOCAL_SYSTEM_CONFIG: dict[str, int] = {"worker_niceness": 0}
"""Ray starts its worker processes at nice 15: beside any busy process they get a few per
cent of a core (an actor importing PyTorch took 100 s instead of 5 beside two busy loops).
faasml's workers are the work itself, so they run at the caller's priority."""


def local_head_args(num_cpus: int) -> dict[str, Any]:
    """``head_node_args`` of a local ``ray.cluster_utils.Cluster`` faasml starts: no dashboard,
    workers at the caller's priority."""
    return {
        "num_cpus": num_cpus,
        "include_dashboard": False,
        "_system_config": LOCAL_SYSTEM_CONFIG,
    }
