"""Measured speed of a model's training step: samples per second of ``loss_and_grad``.

Used by ``benchmarks/bench_workloads.py`` and as the first estimate of u(m), the computation
time per MB of the CE-scaling compute model, before a profiling run calibrates it.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import WorkloadError
from faasml.workloads._base import FloatVector, Model


def samples_per_second(
    model: Model,
    params: FloatVector,
    features: NDArray[Any],
    labels: NDArray[np.int64],
    *,
    seconds: float = 0.5,
    repeats: int = 3,
) -> float:
    """Median over ``repeats`` of samples/s, each repeat calling ``loss_and_grad`` on the whole
    batch for at least ``seconds`` (and at least twice), after one warm-up call."""
    if seconds <= 0 or repeats < 1:
        raise WorkloadError(
            f"seconds ({seconds}) must be > 0 and repeats ({repeats}) >= 1 to measure speed"
        )
    if len(labels) == 0:
        raise WorkloadError("cannot measure speed on an empty batch")
    model.loss_and_grad(params, features, labels)  # warm-up: allocations, lazy set-up
    rates = []
    for _ in range(repeats):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds or count < 2:
            model.loss_and_grad(params, features, labels)
            count += 1
        rates.append(count * len(labels) / elapsed)
    return float(statistics.median(rates))


def seconds_per_mb(rate: float, bytes_per_sample: float) -> float:
    """u: seconds of computation per MB of training data at ``rate`` samples/s."""
    if rate <= 0 or bytes_per_sample <= 0:
        raise WorkloadError("rate and bytes_per_sample must be > 0")
    return 1e6 / (rate * bytes_per_sample)
