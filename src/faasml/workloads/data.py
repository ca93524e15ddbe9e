"""Training data: a ``Dataset`` of features and labels, worker partitions, minibatch order.

The object store holds one partition per worker as npz bytes (``dataset_to_bytes``); a worker
reads its own (``partition(dataset, worker, n)``, rows ``partition_bounds``) and trains on its
rows of each round of the global batch (``global_batch.part_rounds``), which depend only on
(seed, epoch), so a worker restarted from a checkpoint at (epoch, batch) sees exactly the
minibatches it would have seen. Real loaders read LIBSVM, Higgs CSV and CIFAR-10 binary
files and faasml's own npz; seeded generators make data that needs no download; writers make
small files in the public formats for tests.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from faasml.exceptions import WorkloadError
from faasml.workloads._base import check_options
from faasml.workloads._dataset import (
    Dataset,
    batch_order,
    dataset_from_bytes,
    dataset_to_bytes,
    iterate_minibatches,
    num_batches,
    partition,
    partition_bounds,
)
from faasml.workloads._formats import (
    READERS,
    read_cifar10_bin,
    read_higgs_csv,
    read_libsvm,
    read_npz,
    write_cifar10_bin,
    write_higgs_csv,
    write_libsvm,
    write_npz,
)
from faasml.workloads.synthetic import GENERATORS, higgs_like, images, sequences

FORMATS = tuple(sorted(READERS))
"""File formats ``load_dataset`` reads."""


def load_dataset(format: str, path: str | Path, **options: Any) -> Dataset:
    """Read ``path`` in ``format`` (one of ``FORMATS``) with the reader's own options."""
    reader = READERS.get(format)
    if reader is None:
        raise WorkloadError(
            f"the value of dataset.format is {format!r}, but must be one of: {', '.join(FORMATS)}"
        )
    check_options(f"dataset format '{format}'", reader, options, skip=("path",))
    return reader(path, **options)


def generate_dataset(generator: str, samples: int, seed: int = 0, **options: Any) -> Dataset:
    """Make ``samples`` samples with a seeded generator (one of ``GENERATORS``)."""
    make = GENERATORS.get(generator)
    if make is None:
        raise WorkloadError(
            f"the value of dataset.synthetic is {generator!r}, "
            f"but must be one of: {', '.join(sorted(GENERATORS))}"
        )
    check_options(f"dataset generator '{generator}'", make, options, skip=("samples", "seed"))
    return make(samples, seed=seed, **options)


def option_names(kind: str, name: str) -> list[str]:
    """The options a reader (kind 'format') or generator (kind 'synthetic') accepts."""
    table = READERS if kind == "format" else GENERATORS
    skip = ("path",) if kind == "format" else ("samples", "seed")
    return [p for p in inspect.signature(table[name]).parameters if p not in skip]


__all__ = [
    "FORMATS",
    "GENERATORS",
    "Dataset",
    "batch_order",
    "dataset_from_bytes",
    "dataset_to_bytes",
    "generate_dataset",
    "higgs_like",
    "images",
    "iterate_minibatches",
    "load_dataset",
    "num_batches",
    "option_names",
    "partition",
    "partition_bounds",
    "read_cifar10_bin",
    "read_higgs_csv",
    "read_libsvm",
    "read_npz",
    "sequences",
    "write_cifar10_bin",
    "write_higgs_csv",
    "write_libsvm",
    "write_npz",
]
