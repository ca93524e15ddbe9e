"""The global batch: rounds and their rows do not depend on how many functions train."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.exceptions import WorkloadError
from faasml.workloads.data import Dataset, partition
from faasml.workloads.global_batch import (
    max_functions,
    part_rounds,
    round_sizes,
    rounds_per_epoch,
    share,
)


def _bounds(samples: int, n: int) -> list[tuple[int, int]]:
    base, extra = divmod(samples, n)
    out, start = [], 0
    for worker in range(n):
        stop = start + base + (1 if worker < extra else 0)
        out.append((start, stop))
        start = stop
    return out


@settings(max_examples=60, deadline=None)
@given(
    samples=st.integers(1, 400),
    batch=st.integers(1, 64),
    n=st.integers(1, 32),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 5),
)
def test_parts_of_a_round_add_up_to_the_one_function_round(
    samples: int, batch: int, n: int, seed: int, epoch: int
) -> None:
    n = min(n, samples)
    whole = part_rounds(samples, batch, seed=seed, epoch=epoch, start=0, stop=samples)
    parts = [
        part_rounds(samples, batch, seed=seed, epoch=epoch, start=lo, stop=hi)
        for lo, hi in _bounds(samples, n)
    ]
    assert len(whole) == rounds_per_epoch(samples, batch)
    assert [len(r) for r in whole] == list(round_sizes(samples, batch))
    for r, rows in enumerate(whole):
        joined = np.sort(np.concatenate([p[r] for p in parts]))
        assert np.array_equal(joined, np.sort(rows))
    assert np.array_equal(np.sort(np.concatenate(whole)), np.arange(samples))
    if n <= max_functions(batch):
        assert all(len(p[r]) >= 1 for p in parts for r in range(len(whole)))


def test_partitions_are_the_ranges_a_function_reads() -> None:
    data = Dataset(np.arange(10, dtype=np.float32)[:, None], np.zeros(10, dtype=np.int64), 2)
    for worker, (lo, hi) in enumerate(_bounds(10, 3)):
        part = partition(data, worker, 3)
        assert part.features[:, 0].tolist() == list(range(lo, hi))


def test_weighted_mean_of_parts_is_the_global_batch_gradient() -> None:
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(50, 3)), rng.normal(size=3)
    y = x @ np.array([1.0, -2.0, 0.5])

    def grad(rows: np.ndarray) -> np.ndarray:  # mean-square-error gradient over rows
        return 2 * x[rows].T @ (x[rows] @ w - y[rows]) / len(rows)

    whole = part_rounds(50, 16, seed=3, epoch=1, start=0, stop=50)
    for n in (1, 2, 3, 8):
        parts = [part_rounds(50, 16, seed=3, epoch=1, start=a, stop=b) for a, b in _bounds(50, n)]
        for r, rows in enumerate(whole):
            mean = sum(grad(p[r]) * share(len(p[r]), n, len(rows)) for p in parts) / n
            np.testing.assert_allclose(mean, grad(rows), rtol=1e-10)


def test_the_order_changes_with_the_epoch_and_the_seed() -> None:
    a = part_rounds(100, 10, seed=0, epoch=0, start=0, stop=100)
    b = part_rounds(100, 10, seed=0, epoch=1, start=0, stop=100)
    c = part_rounds(100, 10, seed=1, epoch=0, start=0, stop=100)
    assert not np.array_equal(a[0], b[0]) and not np.array_equal(a[0], c[0])


@pytest.mark.parametrize(
    ("samples", "batch", "message"),
    [(10, 0, "batch_size is 0"), (0, 4, "samples is 0"), (10, True, "batch_size is True")],
)
def test_bad_sizes_are_refused_in_one_line(samples: int, batch: int, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        rounds_per_epoch(samples, batch)
