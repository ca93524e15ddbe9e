"""The coordinator's data: the test set and the training set's n partitions in the object
store, where workers read them."""

from __future__ import annotations

import time

from faasml.runtime.coordinator_base import CoordinatorBase
from faasml.workloads.data import Dataset, dataset_to_bytes, partition


class DataPartitions(CoordinatorBase):
    """Writes the run's data to the object store (the training set once per n)."""

    @property
    def data_prefix(self) -> str:
        return f"{self.namespace}/data"

    def set_data(self, train: Dataset, test: Dataset) -> None:
        """Put the test set in the object store; partitions are written per n when needed."""
        self._train = train
        self.samples = len(train)
        self.objects.put(f"{self.data_prefix}/test", dataset_to_bytes(test))

    def prepare_partitions(self, n: int) -> None:
        """Write the n partitions of the training data to the object store (once per n)."""
        if n in self._prepared:
            return
        prefix = f"{self.data_prefix}/n{n}"
        if self.objects.get(f"{prefix}/samples") is None:
            began = time.monotonic()
            for worker in range(n):
                data = dataset_to_bytes(partition(self._train, worker, n))
                self.objects.put(f"{prefix}/part-{worker}", data)
                self.partition_mb += len(data) / 1e6
            self.objects.put(f"{prefix}/samples", str(self.samples).encode())
            self.timings["partition_s"] += time.monotonic() - began
        self._prepared.add(n)

    def partition_write_mbps(self) -> float | None:
        """MB a second the partitions were written at (None before any was written)."""
        seconds = self.timings["partition_s"]
        return self.partition_mb / seconds if seconds > 0 and self.partition_mb > 0 else None
