"""All-reduce through storage with one aggregator (CE-scaling Fig. 5, eq. 3: 3n − 2 transfers).

Workers 1..n−1 upload their gradients; worker 0 (the aggregator) downloads them, averages them
with its own and uploads the mean; workers 1..n−1 download the mean. That is (n−1) + (n−1) + 1
+ (n−1) = 3n − 2 transfers of the whole model, n − 1 of them in a row at the aggregator: the
reason this scheme scales linearly in n.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from faasml.sync.schemes._base import (
    Deadline,
    MeanAccumulator,
    RoundScheme,
    decode,
    encode,
)


class AllReduce(RoundScheme):
    """One aggregator (worker 0) through a stateless store: 3n − 2 model transfers per round."""

    name = "allreduce"

    def _reduce_round(
        self, worker_id: int, round_id: int, gradient: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        deadline = Deadline(self.timeout_s)
        base = self._round_prefix(round_id)
        if worker_id != 0:
            self.store.put(f"{base}/grad/{worker_id}", encode(gradient))
            return decode(self.store.wait_get(f"{base}/mean", deadline.left()))
        total = MeanAccumulator()
        total.add(gradient)
        for peer in range(1, self.n_workers):
            value = self.store.wait_get(f"{base}/grad/{peer}", deadline.left())
            total.add(decode(value, copy=False))
        mean = total.mean()
        self.store.put(f"{base}/mean", encode(mean))
        # Every peer uploaded this round's gradient, so each has read the previous mean.
        self._drop_previous_round(round_id)
        return mean
