"""Readers and writers of the public data formats the seed papers' workloads use.

- LIBSVM text: ``label index:value index:value ...`` per line, 1-based indices, ``#`` comments.
  Distinct labels are mapped, in sorted order, to classes 0..k−1 (so −1/+1 and 0/1 both become
  0/1, and 1..k becomes 0..k−1).
- Higgs CSV (UCI HIGGS): ``label,f1,...,f28`` per line, label first (0 or 1); ``.gz`` is read too.
- CIFAR-10 binary: records of 1 label byte and 3072 pixel bytes (1024 red, 1024 green, 1024
  blue, row-major 32×32), files ``data_batch_1.bin`` ... ``data_batch_5.bin`` and
  ``test_batch.bin``; pixels become float32 in [0, 1], shape (3, 32, 32).
- npz: faasml's own arrays file (``features``, ``labels``, ``num_classes``), as
  ``dataset_to_bytes`` writes a partition; any feature shape and dtype. The function API
  (``faasml.Tuner(train_fn, ...)``) keeps a training function's data in one.

The writers produce the same formats, so tests and demos can make small files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from faasml._gzip import open_gzip_text
from faasml.exceptions import WorkloadError
from faasml.workloads._dataset import Dataset, dataset_from_bytes, dataset_to_bytes
from faasml.workloads.windsr.files import read_windsr

CIFAR_SHAPE = (3, 32, 32)
CIFAR_RECORD = 1 + 3 * 32 * 32
CIFAR_CLASSES = 10


def _open_text(path: Path) -> IO[str]:
    try:
        if path.suffix == ".gz":
            return open_gzip_text(path, WorkloadError)  # a gzip bomb is refused as it streams
        return path.open("r", encoding="utf-8")
    except OSError as err:
        raise WorkloadError(f"cannot read {path}: {err.strerror or err}") from None


def _class_indices(raw: NDArray[np.float64], path: Path) -> tuple[NDArray[np.int64], int]:
    if raw.size == 0:
        raise WorkloadError(f"{path} holds no samples")
    values, indices = np.unique(raw, return_inverse=True)
    if len(values) < 2:
        raise WorkloadError(f"{path} has a single label ({values[0]:g}); need at least 2 classes")
    return indices.astype(np.int64), len(values)


def read_libsvm(
    path: str | Path, num_features: int | None = None, limit: int | None = None
) -> Dataset:
    """A LIBSVM file as a dense float32 dataset; ``num_features`` defaults to the largest index."""
    source = Path(path)
    labels: list[float] = []
    rows: list[tuple[NDArray[np.int64], NDArray[np.float32]]] = []
    with _open_text(source) as handle:
        for number, line in enumerate(handle, start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            if limit is not None and len(labels) >= limit:
                break
            label, *pairs = text.split()
            try:
                labels.append(float(label))
                indices = np.array([int(p.split(":", 1)[0]) for p in pairs], dtype=np.int64)
                values = np.array([float(p.split(":", 1)[1]) for p in pairs], dtype=np.float32)
            except (ValueError, IndexError):
                raise WorkloadError(
                    f"{source}:{number} is not LIBSVM format ('label index:value ...'): "
                    f"{text[:60]!r}"
                ) from None
            if indices.size and indices.min() < 1:
                raise WorkloadError(
                    f"{source}:{number} has feature index < 1 (indices are 1-based)"
                )
            rows.append((indices, values))
    widest = max((int(i.max()) for i, _ in rows if i.size), default=0)
    width = widest if num_features is None else num_features
    if width < 1 or widest > width:
        raise WorkloadError(
            f"{source} has feature indices up to {widest}, "
            f"but num_features is {width} (must be >= 1 and cover every index)"
        )
    features = np.zeros((len(rows), width), dtype=np.float32)
    for row, (indices, values) in enumerate(rows):
        features[row, indices - 1] = values
    classes, count = _class_indices(np.asarray(labels), source)
    return Dataset(features, classes, count)


def write_libsvm(path: str | Path, dataset: Dataset) -> None:
    """Write a flat-feature dataset as LIBSVM (two classes as −1/+1, more as 0..k−1)."""
    features = dataset.features.reshape(len(dataset), -1)
    binary = dataset.num_classes == 2
    with Path(path).open("w", encoding="utf-8") as handle:
        for row, label in zip(features, dataset.labels, strict=True):
            head = ("+1" if label == 1 else "-1") if binary else str(int(label))
            nonzero = np.flatnonzero(row)
            pairs = " ".join(f"{i + 1}:{float(row[i]):.9g}" for i in nonzero)
            handle.write(f"{head} {pairs}\n" if pairs else f"{head}\n")


def read_higgs_csv(path: str | Path, limit: int | None = None) -> Dataset:
    """The UCI HIGGS CSV (label first, then the features), or any CSV of that shape."""
    source = Path(path)
    with _open_text(source) as handle:
        try:
            table = np.loadtxt(handle, delimiter=",", dtype=np.float64, max_rows=limit, ndmin=2)
        except WorkloadError:
            raise
        except ValueError as err:
            raise WorkloadError(
                f"{source} is not a numeric CSV with the label first: {err}"
            ) from None
    if table.shape[1] < 2:
        raise WorkloadError(f"{source} needs a label column and at least one feature column")
    labels = table[:, 0]
    if not np.all(np.isin(labels, (0.0, 1.0))):
        bad = labels[~np.isin(labels, (0.0, 1.0))][0]
        raise WorkloadError(f"{source} has label {bad:g}; Higgs CSV labels must be 0 or 1")
    return Dataset(table[:, 1:].astype(np.float32), labels.astype(np.int64), 2)


def write_higgs_csv(path: str | Path, dataset: Dataset) -> None:
    """Write a two-class flat-feature dataset as Higgs CSV (label first, %.18e like UCI)."""
    if dataset.num_classes != 2:
        raise WorkloadError(f"Higgs CSV holds two classes, but the data has {dataset.num_classes}")
    table = np.column_stack([dataset.labels, dataset.features.reshape(len(dataset), -1)])
    np.savetxt(path, table, delimiter=",", fmt="%.18e")


def _cifar_files(path: Path, split: str) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise WorkloadError(f"{path} is neither a CIFAR-10 .bin file nor a folder of them")
    pattern = {"train": "data_batch_*.bin", "test": "test_batch.bin"}.get(split)
    if pattern is None:
        raise WorkloadError(f"the value of split is {split!r}, but must be one of: train, test")
    files = sorted(path.glob(pattern))
    if not files:
        raise WorkloadError(f"{path} holds no {pattern} files (the CIFAR-10 binary version)")
    return files


def read_cifar10_bin(path: str | Path, split: str = "train", limit: int | None = None) -> Dataset:
    """CIFAR-10 records from a file or a folder (``data_batch_*.bin`` or ``test_batch.bin``)."""
    chunks: list[NDArray[np.uint8]] = []
    for file in _cifar_files(Path(path), split):
        try:
            raw = np.fromfile(file, dtype=np.uint8)
        except OSError as err:
            raise WorkloadError(f"cannot read {file}: {err.strerror or err}") from None
        if raw.size == 0 or raw.size % CIFAR_RECORD:
            raise WorkloadError(
                f"{file} has {raw.size} bytes, but CIFAR-10 binary files hold whole records "
                f"of {CIFAR_RECORD} bytes"
            )
        chunks.append(raw.reshape(-1, CIFAR_RECORD))
    records = np.concatenate(chunks)[:limit]
    labels = records[:, 0].astype(np.int64)
    if labels.max() >= CIFAR_CLASSES:
        raise WorkloadError(f"{path} has label {labels.max()}; CIFAR-10 labels are 0..9")
    pixels = records[:, 1:].reshape(-1, *CIFAR_SHAPE).astype(np.float32) / np.float32(255)
    return Dataset(pixels, labels, CIFAR_CLASSES)


def write_cifar10_bin(path: str | Path, dataset: Dataset) -> None:
    """Write images of shape (3, 32, 32) with values in [0, 1] as CIFAR-10 binary records."""
    if dataset.input_shape != CIFAR_SHAPE or dataset.num_classes > CIFAR_CLASSES:
        raise WorkloadError(
            f"CIFAR-10 binary holds (3, 32, 32) images of at most 10 classes, but the data has "
            f"samples of shape {dataset.input_shape} and {dataset.num_classes} classes"
        )
    pixels = np.clip(np.rint(dataset.features.reshape(len(dataset), -1) * 255), 0, 255)
    records = np.column_stack([dataset.labels, pixels]).astype(np.uint8)
    records.tofile(Path(path))


def read_npz(path: str | Path) -> Dataset:
    """A dataset ``write_npz`` (or ``dataset_to_bytes``) wrote."""
    source = Path(path)
    try:
        data = source.read_bytes()
    except OSError as err:
        raise WorkloadError(f"cannot read {source}: {err.strerror or err}") from None
    try:
        return dataset_from_bytes(data)
    except WorkloadError as err:
        raise WorkloadError(f"{source}: {err}") from None


def write_npz(path: str | Path, dataset: Dataset) -> None:
    """Write ``dataset`` as faasml's npz (features, labels, num_classes)."""
    Path(path).write_bytes(dataset_to_bytes(dataset))


READERS: dict[str, Callable[..., Dataset]] = {
    "libsvm": read_libsvm,
    "higgs-csv": read_higgs_csv,
    "cifar10-bin": read_cifar10_bin,
    "npz": read_npz,
    "windsr": read_windsr,
}
"""Format name (as job files write it) -> reader(path, **options)."""
