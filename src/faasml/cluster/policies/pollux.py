"""A Pollux-like goodput maximiser (Qiao et al., OSDI 2021), with an oracle goodput model."""

from __future__ import annotations

from collections.abc import Callable

from faasml.cluster.policies._base import FloatArray, GreedyGrowthPolicy
from faasml.cluster.records import JobView


class PolluxPolicy(GreedyGrowthPolicy):
    """Every round, re-allocate all jobs to maximise the cluster fitness of Pollux §4.2: the
    generalised mean (p = −1) of each job's speedup (goodput over its best one-GPU goodput),
    with batch sizes co-adapted. Pollux searches with a genetic algorithm; this policy gives
    one GPU to each job (oldest first) and then grows greedily by the marginal fitness gain,
    which is what that objective rewards. A job whose allocation changes pays the restart
    overhead in the simulator."""

    name = "pollux"
    adaptive = True

    def value(self, view: JobView, curve: FloatArray) -> Callable[[float], float]:
        # p = -1: the fitness sums -1/speedup, speedup = goodput / one-GPU goodput.
        base = float(curve[1])
        return lambda g: -base / g if g > 0 else -1e30
