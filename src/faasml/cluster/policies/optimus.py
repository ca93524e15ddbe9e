"""Optimus (Peng et al., EuroSys 2018) as FaPES §7.1 runs it, with an oracle throughput model."""

from __future__ import annotations

from collections.abc import Callable

from faasml.cluster.policies._base import FloatArray, GreedyGrowthPolicy
from faasml.cluster.records import JobView


class OptimusPolicy(GreedyGrowthPolicy):
    """Every round: one GPU to each job (oldest first) to avoid starvation, then GPUs one
    step at a time to the job whose remaining time falls most per GPU; packed placement.
    Jobs keep the batch size they asked for."""

    name = "optimus"

    def value(self, view: JobView, curve: FloatArray) -> Callable[[float], float]:
        # Value of a goodput: minus the remaining time it gives (Optimus's marginal gain).
        return lambda g: -view.remaining / g if g > 0 else -1e30
