"""Cluster scheduling policies, chosen by name (imported only when selected)."""

from __future__ import annotations

from faasml.cluster.policies._base import ClusterPolicy
from faasml.registry import Registry

POLICIES: Registry[type[ClusterPolicy]] = Registry("cluster policy")
POLICIES.register("fifo", "faasml.cluster.policies.fifo:FifoPolicy")
POLICIES.register("sjf", "faasml.cluster.policies.sjf:SjfPolicy")
POLICIES.register("optimus", "faasml.cluster.policies.optimus:OptimusPolicy")
POLICIES.register("pollux", "faasml.cluster.policies.pollux:PolluxPolicy")
POLICIES.register("pollux-learned", "faasml.cluster.policies.pollux_learned:PolluxLearnedPolicy")
POLICIES.register("elasticflow", "faasml.cluster.policies.elasticflow:ElasticFlowPolicy")
POLICIES.register("fapes", "faasml.cluster.policies.fapes:FapesPolicy")


def make_policy(name: str, round_s: float = 60.0, restart_s: float | None = None) -> ClusterPolicy:
    """A policy instance by name; an unknown name lists the choices. ``restart_s`` is the
    restart overhead the policy weighs (default: FaPES Table 2's 5.68 s)."""
    cls = POLICIES.get(name)
    return cls(round_s=round_s) if restart_s is None else cls(round_s=round_s, restart_s=restart_s)


__all__ = ["POLICIES", "ClusterPolicy", "make_policy"]
