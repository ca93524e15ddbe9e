"""The coordinator's data: the test set and the training set's n partitions in the object
store, where workers read them."""

from __future__ import annotations

from faasml.runtime.coordinator_base import CoordinatorBase
from faasml.workloads._dataset import dataset_to_bytes, partition
from faasml.workloads.data import Dataset


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
            for worker in range(n):
                part = partition(self._train, worker, n)
                self.objects.put(f"{prefix}/part-{worker}", dataset_to_bytes(part))
            self.objects.put(f"{prefix}/samples", str(self.samples).encode())
        self._prepared.add(n)
