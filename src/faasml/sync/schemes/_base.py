"""The SyncScheme contract: every worker of a round hands in its gradient, gets the aggregate.

``reduce(worker_id, round_id, gradient)`` blocks until the round's aggregate (the mean of the
n workers' gradients, a flat float32 array) is available and returns it. Every worker of the
round gets the same array. Rounds are numbered by the caller and strictly increase; a scheme may
delete a round's keys once every worker has read them. A worker that does not arrive within
``timeout_s`` makes the others raise TimeoutError (the coordinator then restarts it).

Every scheme computes the mean the same way (``mean_of``: float64 sums in worker order, then
divided by n and rounded to float32), so all schemes give bit-identical results for the same
gradients, and a rerun after a fault gives bit-identical models.
"""

from __future__ import annotations

import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import ConfigError
from faasml.sync.stores._base import Store


def encode(array: NDArray[np.float32]) -> bytes:
    """A flat float32 array as the bytes a store holds (little-endian, no header)."""
    return np.ascontiguousarray(array, dtype="<f4").tobytes()


def decode(value: bytes, copy: bool = True) -> NDArray[np.float32]:
    """The inverse of ``encode``: a fresh, writable copy, or with ``copy=False`` a read-only
    view of ``value`` (one copy less where the array is only read)."""
    if len(value) % 4:
        raise ValueError(f"a float32 array takes a multiple of 4 bytes, got {len(value)}")
    view = np.frombuffer(value, dtype="<f4")
    return view.astype(np.float32) if copy else view


class MeanAccumulator:
    """A running float64 sum, so an aggregator holds one model, not n of them."""

    def __init__(self) -> None:
        self._total: NDArray[np.float64] | None = None
        self.count = 0

    def add(self, array: NDArray[np.float32]) -> None:
        if self._total is None:
            self._total = np.array(array, dtype=np.float64)
        elif array.shape != self._total.shape:
            raise ValueError(f"gradient shapes differ: {array.shape} vs {self._total.shape}")
        else:
            self._total += array
        self.count += 1

    def mean(self) -> NDArray[np.float32]:
        if self._total is None:
            raise ValueError("no gradient was added")
        return (self._total / self.count).astype(np.float32)


def mean_of(arrays: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
    """Mean of equally long arrays: float64 sums in the given order, then / n, as float32."""
    accumulator = MeanAccumulator()
    for array in arrays:
        accumulator.add(array)
    return accumulator.mean()


def shard_bounds(length: int, n_shards: int) -> list[tuple[int, int]]:
    """[start, stop) of ``n_shards`` contiguous shards whose sizes differ by at most one."""
    edges = [i * length // n_shards for i in range(n_shards + 1)]
    return list(itertools.pairwise(edges))


class SyncScheme(ABC):
    """Aggregation of n workers' gradients through a Store, one round at a time."""

    name: str = ""

    def __init__(self, store: Store, n_workers: int, namespace: str, timeout_s: float = 60.0):
        if n_workers < 1:
            raise ConfigError(f"the value of n_workers is {n_workers}, but must be >= 1")
        if timeout_s <= 0:
            raise ConfigError(f"the value of timeout_s is {timeout_s}, but must be > 0")
        self.store = store
        self.n_workers = n_workers
        self.namespace = namespace.rstrip("/")
        self.timeout_s = timeout_s

    @abstractmethod
    def reduce(
        self, worker_id: int, round_id: int, gradient: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """Mean of the round's gradients, as seen by ``worker_id`` (0 <= worker_id < n)."""

    def _check(self, worker_id: int, round_id: int, gradient: NDArray[np.float32]) -> None:
        """Reject arguments that break the contract, naming the value and the rule."""
        if not 0 <= worker_id < self.n_workers:
            raise ConfigError(
                f"the value of worker_id is {worker_id}, but must be in [0, {self.n_workers})"
            )
        if round_id < 0:
            raise ConfigError(f"the value of round_id is {round_id}, but must be >= 0")
        if gradient.ndim != 1:
            raise ConfigError(
                f"the gradient has shape {gradient.shape}, but must be flat (1-D); "
                "flatten it with numpy.ravel"
            )

    def _round_prefix(self, round_id: int) -> str:
        return f"{self.namespace}/{round_id}"


class Deadline:
    """What is left of one reduce's ``timeout_s`` for each wait inside it."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._end = time.monotonic() + timeout_s

    def left(self) -> float:
        return max(self._end - time.monotonic(), 0.0)


class RoundScheme(SyncScheme):
    """``reduce`` as every scheme does it: the arguments checked, a lone worker's mean its own
    gradient (``mean_of``, no store traffic), else ``_reduce_round`` for n >= 2 workers."""

    _previous_round: int | None = None

    def reduce(
        self, worker_id: int, round_id: int, gradient: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        self._check(worker_id, round_id, gradient)
        if self.n_workers == 1:
            # The mean of one gradient is itself (float32 -> float64 -> / 1 -> float32 is
            # exact): a copy, not the float64 sum, which took 2-5 % of a one-function epoch.
            return np.array(gradient, dtype=np.float32)
        return self._reduce_round(worker_id, round_id, gradient)

    @abstractmethod
    def _reduce_round(
        self, worker_id: int, round_id: int, gradient: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """``reduce`` for n >= 2 workers, with checked arguments."""

    def _drop_previous_round(self, round_id: int, suffix: str = "") -> None:
        """For schemes that leave a round's keys in the store: delete the previous round's
        keys under ``suffix`` and remember ``round_id`` as the round to delete next time (call
        once every worker has started ``round_id``, so none still reads the previous one)."""
        if self._previous_round is not None:
            self.store.delete(f"{self._round_prefix(self._previous_round)}/{suffix}")
        self._previous_round = round_id
