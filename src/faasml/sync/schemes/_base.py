"""The SyncScheme contract: every worker of a round hands in its gradient, gets the aggregate.

``reduce(worker_id, round_id, gradient)`` blocks until the round's aggregate (the mean of the
n workers' gradients, a flat float32 array) is available and returns it. Every worker of the
round gets the same array. Rounds are numbered by the caller and strictly increase; a scheme may
delete a round's keys once every worker has read them. A worker that does not arrive within
``timeout_s`` makes the others raise TimeoutError (the coordinator then restarts it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import NDArray

from faasml.sync.stores._base import Store


class SyncScheme(ABC):
    """Aggregation of n workers' gradients through a Store, one round at a time."""

    name: str = ""

    def __init__(self, store: Store, n_workers: int, namespace: str, timeout_s: float = 60.0):
        if n_workers < 1:
            raise ValueError(f"the value of n_workers is {n_workers}, but must be >= 1")
        self.store = store
        self.n_workers = n_workers
        self.namespace = namespace.rstrip("/")
        self.timeout_s = timeout_s

    @abstractmethod
    def reduce(
        self, worker_id: int, round_id: int, gradient: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """Mean of the round's gradients, as seen by ``worker_id`` (0 <= worker_id < n)."""
