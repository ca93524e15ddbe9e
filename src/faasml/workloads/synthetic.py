"""Seeded synthetic data sets, so that demos and tests need no download.

Each generator is deterministic in its arguments (same seed, same bytes) and makes a problem
the matching built-in model can learn but not solve trivially:

- ``higgs-like``: two classes, Gaussian features; the label is drawn from a logistic model with
  a linear part and a weaker quadratic part (a linear model reaches roughly 70–80 %, like Higgs).
- ``images``: CIFAR-shaped images (3, 32, 32): one smooth random template per class plus
  per-image noise, a random brightness shift and a random horizontal shift; pixel values are
  multiples of 1/255 in [0, 1], so they round-trip through the CIFAR-10 binary format exactly.
- ``sequences``: integer token sequences; the label says whether tokens from the upper half of
  the vocabulary outnumber those from the lower half.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from faasml._validate import MAX_DATA_VALUES, check_size, count_text, shown
from faasml.exceptions import WorkloadError
from faasml.workloads._dataset import Dataset
from faasml.workloads.windsr.fields import wind_sr


def _count(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WorkloadError(
            f"the value of dataset.{name} is {shown(value)}, but must be an integer >= {minimum}"
        )
    return value


MAX_SAMPLE_VALUES = 1_000_000
"""The most values one generated sample may hold (an image of 3 × 577 × 577)."""


def _bound(generator: str, values: int, formula: str, per_sample: int) -> None:
    """Refuse a data set beyond ``MAX_DATA_VALUES`` (or samples beyond ``MAX_SAMPLE_VALUES``)
    before generating any of it."""
    where = f"dataset '{generator}'"
    check_size(f"one sample of {where}", per_sample, MAX_SAMPLE_VALUES, "values", WorkloadError)
    check_size(f"{where} ({formula})", values, MAX_DATA_VALUES, "values", WorkloadError)


def higgs_like(
    samples: int,
    features: int = 28,
    seed: int = 0,
    noise: float = 1.0,
    problem_seed: int | None = None,
) -> Dataset:
    """Two-class tabular data shaped like UCI HIGGS (``features`` columns, labels 0/1). The
    labelling rule is drawn from ``seed`` too, unless ``problem_seed`` fixes it: then samples
    drawn with other seeds are more data of the same problem (chunks arriving later)."""
    n, d = _count("samples", samples, 2), _count("features", features)
    if isinstance(noise, bool) or not isinstance(noise, int | float) or not noise >= 0:
        raise WorkloadError(
            f"the value of dataset.noise is {shown(noise)}, but must be a number >= 0"
        )
    _bound("higgs-like", n * d, f"samples {count_text(n)} × features {count_text(d)}", d)
    if problem_seed is not None and (
        isinstance(problem_seed, bool) or not isinstance(problem_seed, int)
    ):
        raise WorkloadError(
            f"the value of dataset.problem_seed is {shown(problem_seed)}, but must be a whole "
            "number"
        )
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 1])
    x = rng.normal(size=(n, d))
    rule = rng if problem_seed is None else np.random.default_rng([problem_seed & 0xFFFFFFFF, 2])
    w = rule.normal(size=d) / np.sqrt(d)
    q = rule.normal(size=d) / d
    logits = 2.0 * (x @ w) + 0.5 * ((x * x) @ q) * d / np.sqrt(d)
    logits += rng.logistic(scale=max(noise, 1e-9), size=n) if noise else 0.0
    labels = (logits > 0).astype(np.int64)
    if labels.min() == labels.max():  # tiny samples: make sure both classes appear
        labels[: n // 2] = 1 - labels[0]
    return Dataset(x.astype(np.float32), labels, 2)


def images(
    samples: int, classes: int = 10, size: int = 32, channels: int = 3, seed: int = 0
) -> Dataset:
    """CIFAR-shaped images of ``classes`` classes (float32 in [0, 1], multiples of 1/255)."""
    n, k = _count("samples", samples), _count("classes", classes, 2)
    side, depth = _count("size", size, 4), _count("channels", channels)
    repeat = -(-side // 4)
    _bound(
        "images",
        (n + k) * depth * (4 * repeat) ** 2,
        f"(samples {count_text(n)} + classes {count_text(k)}) × channels {count_text(depth)} "
        f"× size² {count_text(side)}²",
        depth * side * side,
    )
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 2])
    coarse = rng.uniform(0.0, 1.0, size=(k, depth, 4, 4))
    templates = np.kron(coarse, np.ones((repeat, repeat)))[:, :, :side, :side]
    labels = rng.integers(0, k, size=n)
    shift = rng.integers(-2, 3, size=n)
    pictures = templates[labels]
    for s in np.unique(shift):
        pictures[shift == s] = np.roll(pictures[shift == s], int(s), axis=3)
    pictures = pictures + rng.normal(0.0, 0.15, size=pictures.shape)
    pictures += rng.normal(0.0, 0.1, size=(n, 1, 1, 1))
    pixels = np.clip(np.rint(pictures * 255), 0, 255) / 255
    return Dataset(pixels.astype(np.float32), labels.astype(np.int64), k)


def sequences(samples: int, length: int = 16, vocab: int = 64, seed: int = 0) -> Dataset:
    """Token sequences (int64 ids in [0, vocab)) with a two-class counting label."""
    n, t, v = _count("samples", samples), _count("length", length), _count("vocab", vocab, 4)
    if v > 2**62:
        raise WorkloadError(
            f"the value of dataset.vocab is {shown(v)}, but must be <= 2**62 (token ids are int64)"
        )
    _bound("sequences", n * t, f"samples {count_text(n)} × length {count_text(t)}", t)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 3])
    bias = rng.uniform(0.3, 0.7, size=(n, 1))
    upper = rng.random((n, t)) < bias
    tokens = np.where(
        upper, rng.integers(v // 2, v, size=(n, t)), rng.integers(0, v // 2, size=(n, t))
    )
    labels = (upper.sum(axis=1) * 2 > t).astype(np.int64)
    return Dataset(tokens.astype(np.int64), labels, 2)


DIGITS = 1797
"""Images in scikit-learn's bundled copy of the UCI optical handwritten digits."""


def sklearn_digits(samples: int = DIGITS, size: int = 8, seed: int = 0) -> Dataset:
    """Real data, not generated: the 8×8 handwritten digits scikit-learn ships (UCI, 1,797
    images of 10 classes), ``samples`` of them in a seeded order, pixels scaled to [0, 1] and
    enlarged to ``size`` × ``size`` (8, 16 or 32) by repeating pixels, shape (1, size, size).
    Needs scikit-learn (pip install 'faasml[data]')."""
    from faasml._imports import optional_import

    n = _count("samples", samples, 2)
    if n > DIGITS:
        raise WorkloadError(
            f"the value of dataset.samples is {n}, but sklearn-digits has {DIGITS} images"
        )
    if size not in (8, 16, 32):
        raise WorkloadError(f"the value of dataset.size is {shown(size)}, but must be 8, 16 or 32")
    datasets = optional_import("sklearn.datasets", "data")
    digits = datasets.load_digits()
    order = np.random.default_rng([int(seed) & 0xFFFFFFFF, 4]).permutation(DIGITS)[:n]
    pictures = digits.images[order] / 16.0
    repeat = size // 8
    pictures = np.kron(pictures, np.ones((repeat, repeat)))[:, None, :, :]
    return Dataset(pictures.astype(np.float32), digits.target[order].astype(np.int64), 10)


GENERATORS: dict[str, Callable[..., Dataset]] = {
    "higgs-like": higgs_like,
    "images": images,
    "sequences": sequences,
    "sklearn-digits": sklearn_digits,
    "wind-sr": wind_sr,
}
"""Generator name (as job files write it) -> generator(samples, seed=..., **options)."""
