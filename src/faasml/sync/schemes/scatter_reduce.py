"""Hierarchical (sharded) synchronisation, SMLT §3.3 / §4.2 and Fig. 5, with m = n shards.

Each worker is a *shard generator* (splits its gradient into n shards and uploads n − 1 of them,
keeping its own), a *shard aggregator* (downloads the n − 1 copies of its shard, averages them,
uploads the aggregated shard) and a *global aggregator* (downloads the n − 1 other aggregated
shards and reassembles the mean). Every worker makes 3n − 2 transfers of one shard (M / n), about
3 M bytes, all workers in parallel, instead of the single aggregator's 2 (n − 1) M of all-reduce.
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
    shard_bounds,
)


class ScatterReduce(RoundScheme):
    """SMLT's shard generator / shard aggregators / global aggregator over any store."""

    name = "scatter-reduce"

    def _reduce_round(
        self, worker_id: int, round_id: int, gradient: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        deadline = Deadline(self.timeout_s)
        n = self.n_workers
        base = self._round_prefix(round_id)
        bounds = shard_bounds(gradient.size, n)
        # 1-2. Shard generator: upload shard j for its aggregator j, starting with the next
        # worker so that the n uploads of one shard do not all queue on the same key range.
        for step in range(1, n):
            owner = (worker_id + step) % n
            start, stop = bounds[owner]
            self.store.put(f"{base}/{owner}/shard/{worker_id}", encode(gradient[start:stop]))
        # 3. Shard aggregator: the copies of my shard from every worker, in worker order.
        start, stop = bounds[worker_id]
        total = MeanAccumulator()
        for source in range(n):
            if source == worker_id:
                total.add(gradient[start:stop])
            else:
                key = f"{base}/{worker_id}/shard/{source}"
                total.add(decode(self.store.wait_get(key, deadline.left()), copy=False))
        mine = total.mean()
        # Every worker has uploaded this round's shards, so each has finished the previous
        # round: my keys of that round can go.
        self._drop_previous_round(round_id, f"{worker_id}/")
        # 4. Upload my aggregated shard; 5. global aggregator: reassemble the mean.
        self.store.put(f"{base}/{worker_id}/mean", encode(mine))
        result = np.empty(gradient.size, dtype=np.float32)
        for step in range(n):
            owner = (worker_id + step) % n
            start, stop = bounds[owner]
            if owner == worker_id:
                result[start:stop] = mine
            else:
                value = self.store.wait_get(f"{base}/{owner}/mean", deadline.left())
                result[start:stop] = decode(value, copy=False)
        return result
