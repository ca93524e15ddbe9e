"""The Model contract: a model is a pure function of a FLAT float32 parameter vector.

Every sync scheme aggregates flat float32 arrays (``SyncScheme.reduce``), so a model exposes its
parameters as one such vector and nothing else:

- ``init_params(seed)`` returns a fresh vector of length ``num_params``; the same seed gives the
  same vector, bit for bit, on any process.
- ``loss_and_grad(params, features, labels)`` returns the mean loss over the minibatch and its
  gradient with respect to ``params`` (same shape and dtype). It does not modify ``params`` and
  keeps no state between calls, so any worker holding the same vector computes the same result.
- ``evaluate(params, features, labels)`` returns at least ``loss`` and ``accuracy``.

A model object holds only its architecture (shapes, options), never parameters: it is rebuilt
in each worker from its name and options (see ``faasml.workloads.create_model``), and the
vector travels through the stores and checkpoints.

Features are a numeric array of shape ``(batch, *input_shape)`` (float32, or integer token ids
for sequence models); labels an int64 array of shape ``(batch,)`` holding class indices in
``[0, num_classes)``.

Optional parts (defaults: none):

- **Buffers** (``num_buffers > 0``): state a training step updates besides the parameters, such
  as BatchNorm's running statistics, as one more flat float32 vector. ``init_buffers(seed)``
  gives the initial vector, ``load_buffers(v)`` sets the model's buffers and ``buffers()``
  reads them; ``loss_and_grad`` may update them (its loss and gradient must not depend on
  them) and ``evaluate`` uses them. Workers average the buffers each round with the gradient
  (one synchronised vector) and checkpoints keep them.
- **Own optimiser**: ``own_optimizer()`` returns ``(name, hyperparameters)`` when the model
  chooses its optimiser (a training function does); None leaves it to the job.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import WorkloadError

FloatVector = NDArray[np.float32]
"""A flat float32 parameter or gradient vector."""


class Model(ABC):
    """A trainable model over a flat float32 parameter vector (see the module docstring)."""

    name: str = ""
    """The registry name the model was built under."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int) -> None:
        if not input_shape or any(int(d) < 1 for d in input_shape):
            raise WorkloadError(
                f"the value of input_shape is {input_shape!r}, but must be a non-empty tuple "
                "of positive sizes"
            )
        if num_classes < 2:
            raise WorkloadError(f"the value of num_classes is {num_classes}, but must be >= 2")
        self.input_shape = tuple(int(d) for d in input_shape)
        self.num_classes = int(num_classes)

    @property
    @abstractmethod
    def num_params(self) -> int:
        """Length of the flat parameter vector."""

    @abstractmethod
    def init_params(self, seed: int) -> FloatVector:
        """A fresh parameter vector; deterministic in ``seed``."""

    @abstractmethod
    def loss_and_grad(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> tuple[float, FloatVector]:
        """Mean minibatch loss and its gradient with respect to ``params`` (float32, same shape)."""

    @abstractmethod
    def evaluate(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> dict[str, float]:
        """Mean loss and accuracy (and possibly more) of ``params`` on the given samples."""

    @property
    def num_buffers(self) -> int:
        """Length of the flat buffer vector (0: the model has no buffers)."""
        return 0

    def init_buffers(self, seed: int) -> FloatVector:
        """The initial buffers; deterministic in ``seed``."""
        return np.zeros(0, dtype=np.float32)

    def buffers(self) -> FloatVector:
        """The model's current buffers as a flat float32 vector (a copy)."""
        return np.zeros(0, dtype=np.float32)

    def load_buffers(self, buffers: NDArray[Any]) -> None:
        """Set the model's buffers from a flat vector of ``num_buffers`` values."""
        if np.asarray(buffers).size != self.num_buffers:
            raise WorkloadError(
                f"{self.name or type(self).__name__} has {self.num_buffers} buffer values, "
                f"got {np.asarray(buffers).size}"
            )

    def own_optimizer(self) -> tuple[str, dict[str, Any]] | None:
        """``(optimizer name, hyperparameters)`` the model trains with; None: the job's."""
        return None

    @property
    def size_mb(self) -> float:
        """M: the size of one synchronised vector in MB (gradient and buffers), as a store
        carries it."""
        return (self.num_params + self.num_buffers) * 4 / 1e6

    def check_params(self, params: NDArray[Any]) -> FloatVector:
        """``params`` as a float32 vector of the right length, or a WorkloadError saying why."""
        array = np.asarray(params)
        if array.ndim != 1 or array.shape[0] != self.num_params:
            raise WorkloadError(
                f"{self.name or type(self).__name__} expects a flat vector of {self.num_params} "
                f"parameters, got an array of shape {array.shape}"
            )
        return array.astype(np.float32, copy=False)

    def check_batch(self, features: NDArray[Any], labels: NDArray[Any]) -> None:
        """Raise a WorkloadError naming the mismatch when a batch does not fit the model."""
        if tuple(features.shape[1:]) != self.input_shape:
            raise WorkloadError(
                f"{self.name or type(self).__name__} expects features of shape "
                f"(batch, {', '.join(map(str, self.input_shape))}), got {features.shape}"
            )
        if labels.shape != (features.shape[0],):
            raise WorkloadError(
                f"labels must have shape ({features.shape[0]},) to match the features, "
                f"got {labels.shape}"
            )
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise WorkloadError(
                f"labels must be class indices in [0, {self.num_classes}), "
                f"got values in [{labels.min()}, {labels.max()}]"
            )


class ModelFactory(Protocol):
    """What the ``MODELS`` registry holds: builds a model for data of a given shape.

    ``options`` are the model's own settings from the job file (e.g. ``hidden: [64]``); an
    unknown option raises a WorkloadError naming it.
    """

    def __call__(self, input_shape: tuple[int, ...], num_classes: int, **options: Any) -> Model: ...


def accuracy(scores: NDArray[Any], labels: NDArray[np.int64]) -> float:
    """Share of samples whose highest score is the true class (scores: (batch, classes))."""
    if labels.size == 0:
        return float("nan")
    return float(np.mean(np.argmax(scores, axis=1) == labels))


def evaluate_in_batches(
    model: Model,
    params: FloatVector,
    features: NDArray[Any],
    labels: NDArray[np.int64],
    batch_size: int = 1024,
) -> dict[str, float]:
    """``model.evaluate`` over many samples in slices of ``batch_size`` (bounded memory).

    Every metric is a per-sample mean, so the slices' results are averaged weighted by size.
    """
    if batch_size < 1:
        raise WorkloadError(f"the value of batch_size is {batch_size}, but must be >= 1")
    count = len(labels)
    if count == 0:
        raise WorkloadError("there are no samples to evaluate on")
    totals: dict[str, float] = {}
    for start in range(0, count, batch_size):
        part = model.evaluate(
            params, features[start : start + batch_size], labels[start : start + batch_size]
        )
        weight = min(batch_size, count - start) / count
        for key, value in part.items():
            totals[key] = totals.get(key, 0.0) + weight * value
    return totals


def check_options(what: str, function: Any, options: dict[str, Any], skip: tuple[str, ...]) -> None:
    """Refuse options ``function`` does not take, naming them and the accepted ones."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # no signature to read: the call itself decides
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    accepted = [p for p in parameters if p not in skip]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise WorkloadError(
            f"{what} has no option(s) {', '.join(unknown)}; "
            f"it accepts: {', '.join(accepted) or 'none'}"
        )
