"""Linear models in numpy (no framework): logistic regression and a linear SVM.

These are the LambdaML / CE-scaling workloads LR-Higgs and SVM-Higgs. The parameter vector is
the weight matrix W (features × outputs, row-major) followed by the bias b (outputs), with one
output for two classes and one per class otherwise (logistic regression only).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import WorkloadError
from faasml.workloads._base import FloatVector, Model


class _Linear(Model):
    """Shared layout and bookkeeping of the linear models: z = X·W + b over flattened features."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, l2: float = 0.0) -> None:
        super().__init__(input_shape, num_classes)
        if isinstance(l2, bool) or not isinstance(l2, int | float) or not l2 >= 0:
            raise WorkloadError(f"the value of model.l2 is {l2!r}, but must be a number >= 0")
        self.l2 = float(l2)
        self.num_features = int(np.prod(self.input_shape))
        self.num_outputs = 1 if num_classes == 2 else num_classes

    @property
    def num_params(self) -> int:
        return (self.num_features + 1) * self.num_outputs

    def init_params(self, seed: int) -> FloatVector:
        rng = np.random.default_rng(seed)
        weights = rng.normal(0.0, 0.01, size=self.num_features * self.num_outputs)
        return np.concatenate([weights, np.zeros(self.num_outputs)]).astype(np.float32)

    def _split(self, params: NDArray[Any]) -> tuple[FloatVector, FloatVector]:
        flat = self.check_params(params)
        cut = self.num_features * self.num_outputs
        return flat[:cut].reshape(self.num_features, self.num_outputs), flat[cut:]

    def _scores(
        self, params: NDArray[Any], features: NDArray[Any], labels: NDArray[np.int64]
    ) -> tuple[FloatVector, FloatVector, FloatVector, FloatVector]:
        """(X, W, b, z) for a checked batch; X flattened to (batch, features) float32."""
        self.check_batch(features, labels)
        weights, bias = self._split(params)
        x = np.asarray(features, dtype=np.float32).reshape(features.shape[0], -1)
        return x, weights, bias, x @ weights + bias

    def _pack(
        self, grad_w: NDArray[Any], grad_b: NDArray[Any], weights: FloatVector
    ) -> FloatVector:
        if self.l2:
            grad_w = grad_w + self.l2 * weights
        return np.concatenate([grad_w.ravel(), grad_b.ravel()]).astype(np.float32)

    def _penalty(self, weights: FloatVector) -> float:
        return 0.5 * self.l2 * float(np.dot(weights.ravel(), weights.ravel())) if self.l2 else 0.0


class LogisticRegression(_Linear):
    """Logistic regression: mean cross-entropy of sigmoid (2 classes) or softmax scores.

    Loss L = mean_i[log(1 + e^{z_i}) − y_i·z_i] + (λ/2)‖W‖²  (binary), gradient
    ∂L/∂W = Xᵀ(σ(z) − y)/B + λW, ∂L/∂b = mean(σ(z) − y); the softmax form for more classes.
    Options: ``l2`` (λ, default 0).
    """

    name = "logistic-regression"

    def _probabilities(self, z: FloatVector) -> FloatVector:
        if self.num_outputs == 1:
            return 0.5 * (1.0 + np.tanh(0.5 * z))  # the sigmoid, without overflow
        shifted = z - z.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        return exp / exp.sum(axis=1, keepdims=True)

    def _loss(self, z: FloatVector, labels: NDArray[np.int64]) -> float:
        if self.num_outputs == 1:
            zz = z[:, 0].astype(np.float64)
            return float(np.mean(np.logaddexp(0.0, zz) - labels * zz))
        zz = z.astype(np.float64)
        log_norm = np.logaddexp.reduce(zz, axis=1)
        return float(np.mean(log_norm - zz[np.arange(len(labels)), labels]))

    def _residual(self, z: FloatVector, labels: NDArray[np.int64]) -> FloatVector:
        """∂(per-sample loss)/∂z: p − onehot(y)."""
        p = self._probabilities(z)
        if self.num_outputs == 1:
            return p - labels[:, None].astype(np.float32)
        p[np.arange(len(labels)), labels] -= 1.0
        return p

    def loss_and_grad(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> tuple[float, FloatVector]:
        x, weights, _, z = self._scores(params, features, labels)
        residual = self._residual(z, labels) / np.float32(max(len(labels), 1))
        loss = self._loss(z, labels) + self._penalty(weights)
        return loss, self._pack(x.T @ residual, residual.sum(axis=0), weights)

    def evaluate(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> dict[str, float]:
        _, weights, _, z = self._scores(params, features, labels)
        if self.num_outputs == 1:
            predicted = (z[:, 0] > 0).astype(np.int64)
        else:
            predicted = np.argmax(z, axis=1)
        return {
            "loss": self._loss(z, labels) + self._penalty(weights),
            "accuracy": float(np.mean(predicted == labels)) if len(labels) else float("nan"),
        }


class LinearSVM(_Linear):
    """Linear SVM, two classes: mean hinge loss with labels mapped to s = ±1.

    Loss L = mean_i max(0, 1 − s_i·z_i) + (λ/2)‖W‖², subgradient
    ∂L/∂W = −Xᵀ(s·[s·z < 1])/B + λW. Options: ``l2`` (λ, default 0).
    """

    name = "svm"

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, l2: float = 0.0) -> None:
        if num_classes != 2:
            raise WorkloadError(
                f"model 'svm' is a two-class model, but the data has {num_classes} classes; "
                "use logistic-regression or mlp for more classes"
            )
        super().__init__(input_shape, num_classes, l2)

    def loss_and_grad(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> tuple[float, FloatVector]:
        x, weights, _, z = self._scores(params, features, labels)
        sign = (2 * labels - 1).astype(np.float32)
        margin = 1.0 - sign * z[:, 0]
        active = (margin > 0).astype(np.float32)
        coefficient = (-sign * active / np.float32(max(len(labels), 1)))[:, None]
        loss = float(np.mean(np.maximum(margin, 0.0), dtype=np.float64)) + self._penalty(weights)
        return loss, self._pack(x.T @ coefficient, coefficient.sum(axis=0), weights)

    def evaluate(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> dict[str, float]:
        _, weights, _, z = self._scores(params, features, labels)
        sign = 2 * labels - 1
        loss = float(np.mean(np.maximum(1.0 - sign * z[:, 0], 0.0), dtype=np.float64))
        predicted = (z[:, 0] > 0).astype(np.int64)
        return {
            "loss": loss + self._penalty(weights),
            "accuracy": float(np.mean(predicted == labels)) if len(labels) else float("nan"),
        }
