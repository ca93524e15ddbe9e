"""Workload profiles: a job as the performance model sees it (CE-scaling Table III: D, M, b_z, u).

The file format is documented in docs/workloads.md; the shipped profiles live in
``faasml/workloads/profiles`` and are found by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml._validate import Fields, load_yaml, shipped_or_path
from faasml.catalog import Source, parse_sources
from faasml.exceptions import WorkloadError

PROFILE_DIR = Path(__file__).parent / "workloads" / "profiles"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class ComputeProfile:
    """u(m): seconds of computation per MB of training data for a function of ``m`` MB.

    Two forms. ``amdahl``: u(m) = u₁·((1−p)/min(v,1) + p/v) with v = vCPUs(m), u₁ the time per
    MB on one full vCPU and p the parallel fraction. ``table``: measured (memory, u) points,
    interpolated in log–log space, made non-increasing in memory (more memory never computes
    slower), scaled as 1/v below the first point and flat above the last.
    """

    kind: str
    seconds_per_mb_1vcpu: float = 0.0
    parallel_fraction: float = 0.0
    points: tuple[tuple[float, float], ...] = ()

    def seconds_per_mb(self, vcpus: ArrayLike, memory_mb: ArrayLike) -> NDArray[np.float64]:
        v = np.asarray(vcpus, dtype=float)
        if self.kind == "amdahl":
            u1, p = self.seconds_per_mb_1vcpu, self.parallel_fraction
            result: NDArray[np.float64] = u1 * ((1 - p) / np.minimum(v, 1.0) + p / v)
            return result
        memory = np.asarray(memory_mb, dtype=float)
        xs = np.log([pt[0] for pt in self.points])
        ys = np.minimum.accumulate(np.log([pt[1] for pt in self.points]))
        inside = np.exp(np.interp(np.log(memory), xs, ys))
        first_mb = self.points[0][0]
        below = inside * np.maximum(first_mb / memory, 1.0)  # CPU share shrinks with memory
        return np.where(memory < first_mb, below, inside)


@dataclass(frozen=True)
class Workload:
    """A training job as the model sees it; sizes in MB, times in seconds."""

    name: str
    description: str
    model: str
    dataset: str
    dataset_mb: float
    """D: the training data, as stored in the object store."""
    samples: int
    model_mb: float
    """M: the size of the model (and of one gradient)."""
    batch_size: int
    """b_z: samples one function processes per iteration (a paper's profile), or the global
    batch B of a job faasml runs (``global_batch``)."""
    compute: ComputeProfile
    epochs: int
    """Epochs to plan for when no target loss drives the run."""
    runtime_mb: float = 200.0
    """Memory a worker needs besides its data and model (interpreter, framework)."""
    model_copies: float = 4.0
    """Copies of the model held in memory (weights, gradient, optimiser state, aggregate)."""
    straggler_share: float = 0.0
    """What a synchronised round of several functions waits for its slowest, as a share of a
    round's computation (measured by the job probe, ``runtime.sync_probe``; 0: not priced)."""
    evaluation_share: float = 0.0
    """The share of one function's u(m) that is the epoch's evaluation of the test set
    (measured by the job probe; 0 for a paper's workload): with n functions, worker 0
    evaluates it all while the others wait, so it is not divided among them (eq. 2)."""
    target_loss: float | None = None
    learning_rate: float | None = None
    sources: tuple[Source, ...] = field(default=())
    notes: str = ""
    path: str | None = None
    global_batch: bool = False
    """``batch_size`` is the global batch B, split over the n functions (every job faasml runs:
    its results do not depend on n); False for a paper's profile, whose b_z is per function."""
    smallest_batch: int | None = None
    """The smallest global batch a trial may draw (a search space over ``batch_size``), so
    that no trial is split over more than its own ⌊B/2⌋ functions; None: ``batch_size``."""

    def iterations_per_epoch(self, n: ArrayLike) -> NDArray[np.int64]:
        """k = max(1, ⌊S/B⌋) for a global batch, whatever n is; a paper's per-function b_z
        gives k = ⌈S / (n · b_z)⌉ (CE-scaling: k = D / (n · b_z))."""
        count = np.asarray(n, dtype=float)
        if self.global_batch:
            k = rounds_per_epoch(self.samples, self.batch_size)
            return np.full(count.shape, k, dtype=np.int64)
        return np.ceil(self.samples / (count * self.batch_size)).astype(np.int64)

    def memory_needed_mb(self, n: ArrayLike) -> NDArray[np.float64]:
        """Memory a function needs to hold its partition D/n, the model copies and the runtime."""
        result: NDArray[np.float64] = (
            self.runtime_mb
            + self.dataset_mb / np.asarray(n, dtype=float)
            + self.model_copies * self.model_mb
        )
        return result

    @property
    def max_functions(self) -> int:
        """The most functions with rows in every round: ⌊B/2⌋ of a global batch
        (``max_functions``); for a per-function b_z, samples / b_z (one full batch each)."""
        if self.global_batch:
            return max_functions(min(self.batch_size, self.smallest_batch or self.batch_size))
        return max(1, self.samples // self.batch_size)


def rounds_per_epoch(samples: int, batch_size: int) -> int:
    """q = max(1, ⌊S/B⌋): the rounds of an epoch of S rows with global batch B (the S mod B
    rows left over join its last round). The rule's one place (``workloads.global_batch``)."""
    return max(1, samples // batch_size)


def max_functions(batch_size: int) -> int:
    """⌊B/2⌋ (at least 1): the most functions a global batch B is split over, so that each
    function holds a whole stratum of rows and trains on at least one row of every round."""
    return max(1, batch_size // 2)


def builtin_workloads() -> list[str]:
    """Names of the workload profiles shipped with faasml."""
    return sorted(path.stem for path in PROFILE_DIR.glob("*.yaml"))


def load_workload(name_or_path: str | os.PathLike[str]) -> Workload:
    """Load a shipped profile by name or a profile file by path, validating every field."""
    path = shipped_or_path(name_or_path, PROFILE_DIR, "workload")
    return parse_workload(load_yaml(path, WorkloadError), path=str(path))


def parse_workload(data: Any, *, path: str | None = None) -> Workload:
    """Build a Workload from a parsed YAML mapping; errors name the field and the rule."""
    top = Fields(data, "", WorkloadError)
    fmt = top.integer("format", minimum=1)
    if fmt != FORMAT_VERSION:
        raise top.fail("format", fmt, f"this faasml reads workload format {FORMAT_VERSION}")
    dataset = top.sub("dataset")
    memory = top.sub("memory", {})
    workload = Workload(
        name=top.text("name"),
        description=top.text("description", "-"),
        model=top.text("model"),
        dataset=dataset.text("name"),
        dataset_mb=dataset.number("size_mb", minimum=0, strict_minimum=True),
        samples=dataset.integer("samples", minimum=1),
        model_mb=top.number("model_size_mb", minimum=0, strict_minimum=True),
        batch_size=top.integer("batch_size", minimum=1),
        compute=_compute(top.sub("compute")),
        epochs=top.integer("epochs", minimum=1),
        runtime_mb=memory.number("runtime_mb", 200.0, minimum=0),
        model_copies=memory.number("model_copies", 4.0, minimum=1),
        target_loss=top.optional_number("target_loss"),
        learning_rate=top.optional_number("learning_rate", minimum=0, strict_minimum=True),
        sources=parse_sources(top),
        notes=str(top.raw("notes", "")),
        path=path,
    )
    dataset.finish()
    memory.finish()
    top.finish()
    if workload.batch_size > workload.samples:
        raise top.fail(
            "batch_size",
            workload.batch_size,
            f"must be <= dataset.samples ({workload.samples})",
        )
    return workload


def _compute(fields: Fields) -> ComputeProfile:
    kind = fields.choice("model", ("amdahl", "table"))
    if kind == "amdahl":
        profile = ComputeProfile(
            kind=kind,
            seconds_per_mb_1vcpu=fields.number(
                "seconds_per_mb_1vcpu", minimum=0, strict_minimum=True
            ),
            parallel_fraction=fields.number("parallel_fraction", minimum=0, maximum=1),
        )
    else:
        points = []
        for index, point in enumerate(fields.items("points")):
            ok = (
                isinstance(point, list)
                and len(point) == 2
                and all(isinstance(v, int | float) and v > 0 for v in point)
            )
            if not ok:
                raise fields.fail(
                    f"points[{index}]", point, "must be a pair [memory_mb, seconds_per_mb] > 0"
                )
            points.append((float(point[0]), float(point[1])))
        memories = [p[0] for p in points]
        if memories != sorted(set(memories)):
            raise fields.fail("points", points, "must be sorted by memory without repeats")
        profile = ComputeProfile(kind=kind, points=tuple(points))
    fields.raw("derivation", None)
    fields.finish()
    return profile
