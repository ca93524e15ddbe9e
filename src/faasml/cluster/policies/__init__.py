"""Cluster policies, chosen by name (imported only when selected), in one registry of two
groups: ``gpu-pool`` policies schedule elastic jobs on a shared GPU pool (``faasml cluster
simulate``); ``idle-nodes`` policies split a batch cluster's idle nodes among scavenging jobs
(MalleTrain, ``faasml cluster scavenge``). Each group has its own contract, so a name is made
only by its group's maker, which names the other command for the other group's names."""

from __future__ import annotations

from faasml.cluster.policies._base import ClusterPolicy
from faasml.exceptions import ConfigError, UnknownNameError
from faasml.registry import Registry

GPU_POOL = "gpu-pool"
IDLE_NODES = "idle-nodes"
COMMANDS = {GPU_POOL: "faasml cluster simulate", IDLE_NODES: "faasml cluster scavenge"}

POLICIES: Registry[type] = Registry("cluster policy")
for _name, _entry in (
    ("fifo", "fifo:FifoPolicy"),
    ("sjf", "sjf:SjfPolicy"),
    ("optimus", "optimus:OptimusPolicy"),
    ("pollux", "pollux:PolluxPolicy"),
    ("pollux-learned", "pollux_learned:PolluxLearnedPolicy"),
    ("elasticflow", "elasticflow:ElasticFlowPolicy"),
    ("fapes", "fapes:FapesPolicy"),
):
    POLICIES.register(_name, f"faasml.cluster.policies.{_entry}", GPU_POOL)
for _name, _entry in (
    ("malletrain", "MalleTrainPolicy"),
    ("freetrain", "FreeTrainPolicy"),
    ("freetrain-guess", "FreeTrainGuessPolicy"),
    ("greedy", "GreedyPolicy"),
    ("equal", "EqualPolicy"),
):
    POLICIES.register(_name, f"faasml.cluster.scavenge.policies:{_entry}", IDLE_NODES)


def policy_class(name: str, group: str) -> type:
    """The class of policy ``name``, which must be of ``group``: an unknown name lists the
    group's names; a name of the other group says which command takes it."""
    if name not in POLICIES:
        raise UnknownNameError(
            f"unknown {group} policy '{name}'; choose one of: {', '.join(POLICIES.names(group))}"
        )
    found = POLICIES.group_of(name)
    if found != group:
        raise ConfigError(
            f"'{name}' is a policy of the {found} group (for {COMMANDS[found]}), not of "
            f"the {group} group; "
            f"choose one of: {', '.join(POLICIES.names(group))}"
        )
    return POLICIES.get(name)


def make_policy(name: str, round_s: float = 60.0, restart_s: float | None = None) -> ClusterPolicy:
    """A GPU-pool policy instance by name. ``restart_s`` is the restart overhead the policy
    weighs (default: FaPES Table 2's 5.68 s)."""
    cls = policy_class(name, GPU_POOL)
    policy = (
        cls(round_s=round_s) if restart_s is None else cls(round_s=round_s, restart_s=restart_s)
    )
    assert isinstance(policy, ClusterPolicy)
    return policy


__all__ = ["GPU_POOL", "IDLE_NODES", "POLICIES", "ClusterPolicy", "make_policy", "policy_class"]
