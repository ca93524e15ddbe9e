"""The ``Dataset`` record, worker partitions, seeded minibatch order and npz (de)serialisation.

Public through ``faasml.workloads.data``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import WorkloadError


@dataclass(frozen=True, eq=False)
class Dataset:
    """Samples as arrays: ``features`` of shape (samples, *input_shape), int64 ``labels``.

    Features are float32 (or integer token ids for sequence models); labels are class indices
    in ``[0, num_classes)``. ``num_classes`` is kept explicitly so a partition that happens to
    miss a class still describes the whole problem.
    """

    features: NDArray[Any]
    labels: NDArray[np.int64]
    num_classes: int

    def __post_init__(self) -> None:
        features, labels = np.asarray(self.features), np.asarray(self.labels)
        if features.ndim < 2:
            raise WorkloadError(
                f"features must have shape (samples, ...) with at least 2 dimensions, "
                f"got {features.shape}"
            )
        if not (
            np.issubdtype(features.dtype, np.floating) or np.issubdtype(features.dtype, np.integer)
        ):
            raise WorkloadError(f"features must be numeric, got dtype {features.dtype}")
        if np.issubdtype(features.dtype, np.floating):
            features = features.astype(np.float32, copy=False)
        if labels.shape != (features.shape[0],):
            raise WorkloadError(
                f"labels must have shape ({features.shape[0]},) to match the features, "
                f"got {labels.shape}"
            )
        if labels.size and not np.issubdtype(labels.dtype, np.integer):
            raise WorkloadError(f"labels must be integer class indices, got dtype {labels.dtype}")
        labels = labels.astype(np.int64, copy=False)
        if self.num_classes < 2:
            raise WorkloadError(f"the value of num_classes is {self.num_classes}, but must be >= 2")
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise WorkloadError(
                f"labels must lie in [0, {self.num_classes}), "
                f"got values in [{labels.min()}, {labels.max()}]"
            )
        object.__setattr__(self, "features", features)
        object.__setattr__(self, "labels", labels)

    @classmethod
    def from_arrays(
        cls, features: NDArray[Any], labels: NDArray[Any], num_classes: int | None = None
    ) -> Dataset:
        """Build a dataset, inferring ``num_classes`` (at least 2) from the labels if not given."""
        labels = np.asarray(labels)
        if num_classes is None:
            num_classes = max(2, int(labels.max()) + 1) if labels.size else 2
        return cls(np.asarray(features), labels.astype(np.int64), num_classes)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.features.shape[1:])

    @property
    def size_mb(self) -> float:
        """D: the data as a store holds it (features and labels), in MB."""
        return (self.features.nbytes + self.labels.nbytes) / 1e6

    def subset(self, indices: NDArray[np.integer[Any]] | slice) -> Dataset:
        """The samples at ``indices`` (a copy), same ``num_classes``."""
        return Dataset(self.features[indices].copy(), self.labels[indices].copy(), self.num_classes)

    def split(self, test_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
        """A seeded random (train, test) split; ``test_fraction`` in [0, 1)."""
        if not 0 <= test_fraction < 1:
            raise WorkloadError(
                f"the value of test_fraction is {test_fraction!r}, but must be in [0, 1)"
            )
        order = np.random.default_rng(seed).permutation(len(self))
        n_test = round(test_fraction * len(self))
        return self.subset(np.sort(order[n_test:])), self.subset(np.sort(order[:n_test]))


def partition(dataset: Dataset, worker: int, n: int) -> Dataset:
    """Worker ``worker``'s share of ``n`` contiguous shards; sizes differ by at most one sample."""
    if n < 1:
        raise WorkloadError(f"the value of n is {n}, but must be >= 1")
    if not 0 <= worker < n:
        raise WorkloadError(f"the value of worker is {worker}, but must be in [0, {n})")
    if n > len(dataset):
        raise WorkloadError(
            f"cannot split {len(dataset)} samples among {n} workers; "
            f"use at most {len(dataset)} workers or more data"
        )
    start, stop = partition_bounds(len(dataset), worker, n)
    return dataset.subset(slice(start, stop))


def partition_bounds(samples: int, worker: int, n: int) -> tuple[int, int]:
    """The rows [start, stop) of ``samples`` that ``partition`` gives worker ``worker`` of n."""
    base, extra = divmod(samples, n)
    start = worker * base + min(worker, extra)
    return start, start + base + (1 if worker < extra else 0)


def num_batches(num_samples: int, batch_size: int) -> int:
    """Minibatches per epoch over ``num_samples`` (the last one may be smaller)."""
    _check_batch_size(batch_size)
    return -(-num_samples // batch_size)


def batch_order(num_samples: int, *, seed: int, epoch: int) -> NDArray[np.int64]:
    """The seeded permutation of sample indices an epoch walks; depends only on (seed, epoch)."""
    if epoch < 0:
        raise WorkloadError(f"the value of epoch is {epoch}, but must be >= 0")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch)])
    return rng.permutation(num_samples).astype(np.int64)


def iterate_minibatches(
    dataset: Dataset, batch_size: int, *, seed: int, epoch: int, start: int = 0
) -> Iterator[tuple[int, NDArray[Any], NDArray[np.int64]]]:
    """Yield ``(batch_index, features, labels)`` of one epoch, from batch ``start`` on.

    The order is ``batch_order(len(dataset), seed=seed, epoch=epoch)`` cut into ``batch_size``
    pieces; resuming with ``start = k`` yields exactly the batches k, k+1, ... of the full epoch.
    """
    total = num_batches(len(dataset), batch_size)
    if not 0 <= start <= total:
        raise WorkloadError(f"the value of start is {start}, but must be in [0, {total}]")
    order = batch_order(len(dataset), seed=seed, epoch=epoch)
    for index in range(start, total):
        chosen = order[index * batch_size : (index + 1) * batch_size]
        yield index, dataset.features[chosen], dataset.labels[chosen]


def dataset_to_bytes(dataset: Dataset) -> bytes:
    """npz bytes of a dataset (or partition), for the object store."""
    buffer = io.BytesIO()
    np.savez(
        buffer,
        features=dataset.features,
        labels=dataset.labels,
        num_classes=np.asarray(dataset.num_classes, dtype=np.int64),
    )
    return buffer.getvalue()


def dataset_from_bytes(data: bytes) -> Dataset:
    """The dataset ``dataset_to_bytes`` wrote; anything else raises a WorkloadError."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return Dataset(archive["features"], archive["labels"], int(archive["num_classes"]))
    except (OSError, ValueError, KeyError) as err:
        raise WorkloadError(f"bytes are not a faasml dataset partition: {err}") from None


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise WorkloadError(
            f"the value of batch_size is {batch_size!r}, but must be an integer >= 1"
        )
