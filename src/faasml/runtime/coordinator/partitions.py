"""The coordinator's data: the test set and the training set's n partitions in the object
store, where workers read them."""

from __future__ import annotations

from faasml.runtime.coordinator.state import CoordinatorState
from faasml.sync.stores import Store
from faasml.workloads.data import Dataset, dataset_to_bytes, partition


class Partitions:
    """Writes the run's data to the object store (the training set once per n)."""

    def __init__(self, objects: Store, state: CoordinatorState) -> None:
        """``state``: the namespace the data goes under and the timings it adds to."""
        self._objects = objects
        self._state = state
        self._train: Dataset | None = None
        self._written_n: set[int] = set()
        self.samples = 0
        """Samples in the training set."""
        self.partition_mb = 0.0
        """MB of training-set partitions written to the object store."""

    @property
    def data_prefix(self) -> str:
        return f"{self._state.namespace}/data"

    def set_data(self, train: Dataset, test: Dataset) -> None:
        """Put the test set in the object store; the training set's partitions are written
        per n when needed (those of earlier data are not used again)."""
        self._train = train
        self._written_n.clear()
        self.samples = len(train)
        self._objects.put(f"{self.data_prefix}/test", dataset_to_bytes(test))

    def prepare(self, n: int) -> None:
        """Write the n partitions of the training data to the object store (once per n)."""
        if n in self._written_n:
            return
        prefix = f"{self.data_prefix}/n{n}"
        if self._objects.get(f"{prefix}/samples") is None:
            assert self._train is not None, "set_data comes first"
            began = self._state.clock.monotonic()
            for worker in range(n):
                data = dataset_to_bytes(partition(self._train, worker, n))
                self._objects.put(f"{prefix}/part-{worker}", data)
                self.partition_mb += len(data) / 1e6
            self._objects.put(f"{prefix}/samples", str(self.samples).encode())
            self._state.timings["partition_s"] += self._state.clock.monotonic() - began
        self._written_n.add(n)

    def write_mbps(self) -> float | None:
        """MB a second the partitions were written at (None before any was written)."""
        seconds = self._state.timings["partition_s"]
        return self.partition_mb / seconds if seconds > 0 and self.partition_mb > 0 else None
