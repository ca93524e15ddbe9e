"""Optimisers over flat float32 vectors, with explicit state that a checkpoint can hold.

Every worker of a synchronous data-parallel run applies the same optimiser step to the same
aggregated gradient, so all workers keep identical parameters and optimiser state without
exchanging the state itself. ``state_dict()`` is a ``{name: ndarray}`` mapping (``to_bytes``
packs it as npz) and ``load_state_dict`` restores it exactly: a run resumed from a checkpoint
continues bit for bit.
"""

from __future__ import annotations

import io
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import ConfigError
from faasml.registry import Registry
from faasml.workloads._base import FloatVector


class Optimizer(ABC):
    """Updates a flat parameter vector from its (aggregated) gradient, one step at a time."""

    name: ClassVar[str] = ""
    defaults: ClassVar[dict[str, float | bool]] = {}
    """Hyperparameters the optimiser accepts, with their defaults (``lr`` has none)."""

    def __init__(self, num_params: int, **hyperparameters: Any) -> None:
        if num_params < 1:
            raise ConfigError(f"the value of num_params is {num_params}, but must be >= 1")
        unknown = sorted(set(hyperparameters) - set(self.defaults) - {"lr"})
        if unknown:
            raise ConfigError(
                f"optimizer '{self.name}' has no hyperparameter(s) {', '.join(unknown)}; "
                f"it accepts: {', '.join(['lr', *self.defaults])}"
            )
        if "lr" not in hyperparameters:
            raise ConfigError(f"optimizer.lr is missing (optimizer '{self.name}' needs it)")
        self.num_params = int(num_params)
        self.lr = _positive("lr", hyperparameters["lr"])
        self.steps = 0
        self._configure({**self.defaults, **hyperparameters})

    @abstractmethod
    def _configure(self, hyperparameters: dict[str, Any]) -> None:
        """Validate and store the optimiser's own hyperparameters (``lr`` is done)."""

    @abstractmethod
    def _update(self, params: FloatVector, grad: FloatVector) -> FloatVector: ...

    @abstractmethod
    def _buffers(self) -> dict[str, FloatVector]: ...

    def hyperparameters(self) -> dict[str, float | bool]:
        """The current hyperparameters (``lr`` included), as the job file names them."""
        values: dict[str, float | bool] = {"lr": self.lr}
        values.update({name: getattr(self, name) for name in self.defaults})
        return values

    def step(self, params: FloatVector, grad: FloatVector) -> FloatVector:
        """Return the updated parameters (a new array); ``params`` and ``grad`` are not changed."""
        p = np.asarray(params, dtype=np.float32)
        g = np.asarray(grad, dtype=np.float32)
        if p.shape != (self.num_params,) or g.shape != (self.num_params,):
            raise ConfigError(
                f"optimizer '{self.name}' was built for {self.num_params} parameters, "
                f"got params of shape {p.shape} and grad of shape {g.shape}"
            )
        self.steps += 1
        return self._update(p, g)

    def state_dict(self) -> dict[str, NDArray[Any]]:
        """Everything needed to continue exactly: step count and moment buffers (copies)."""
        state: dict[str, NDArray[Any]] = {"steps": np.asarray(self.steps, dtype=np.int64)}
        state.update({key: value.copy() for key, value in self._buffers().items()})
        return state

    def load_state_dict(self, saved: dict[str, NDArray[Any]]) -> None:
        """Restore a ``state_dict()``; one of another optimiser or size is refused."""
        buffers = self._buffers()
        expected = {"steps", *buffers}
        if set(saved) != expected:
            raise ConfigError(
                f"optimizer saved has keys {sorted(saved)}, but '{self.name}' needs "
                f"{sorted(expected)}"
            )
        for key, buffer in buffers.items():
            value = np.asarray(saved[key], dtype=np.float32)
            if value.shape != buffer.shape:
                raise ConfigError(
                    f"optimizer saved '{key}' has shape {value.shape}, but must be {buffer.shape}"
                )
            buffer[...] = value
        self.steps = int(saved["steps"])

    def to_bytes(self) -> bytes:
        """The state as npz bytes, for a checkpoint in the object store."""
        buffer = io.BytesIO()
        np.savez(buffer, **self.state_dict())  # type: ignore[arg-type]
        return buffer.getvalue()

    def load_bytes(self, data: bytes) -> None:
        """Restore state written by ``to_bytes``."""
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            self.load_state_dict({key: archive[key] for key in archive.files})


class SGD(Optimizer):
    """SGD with (heavy-ball or Nesterov) momentum and L2 weight decay added to the gradient.

    v ← μ·v + (g + λ·θ);  θ ← θ − η·v  (Nesterov: θ ← θ − η·(g + λ·θ + μ·v)), as in PyTorch.
    """

    name = "sgd"
    defaults: ClassVar[dict[str, float | bool]] = {
        "momentum": 0.0,
        "weight_decay": 0.0,
        "nesterov": False,
    }

    def _configure(self, hyperparameters: dict[str, Any]) -> None:
        self.momentum = _fraction("momentum", hyperparameters["momentum"])
        self.weight_decay = _non_negative("weight_decay", hyperparameters["weight_decay"])
        self.nesterov = _flag("nesterov", hyperparameters["nesterov"])
        if self.nesterov and self.momentum == 0.0:
            raise ConfigError("optimizer.nesterov is true, but needs optimizer.momentum > 0")
        self.velocity = np.zeros(self.num_params, dtype=np.float32)

    def _buffers(self) -> dict[str, FloatVector]:
        return {"velocity": self.velocity}

    def _update(self, params: FloatVector, grad: FloatVector) -> FloatVector:
        d = grad + np.float32(self.weight_decay) * params if self.weight_decay else grad
        if self.momentum == 0.0:
            return params - np.float32(self.lr) * d
        mu = np.float32(self.momentum)
        self.velocity = mu * self.velocity + d
        direction = d + mu * self.velocity if self.nesterov else self.velocity
        return params - np.float32(self.lr) * direction


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction and optional L2 weight decay, as in PyTorch.

    m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²;  θ ← θ − η·(m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε).
    """

    name = "adam"
    defaults: ClassVar[dict[str, float | bool]] = {
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "weight_decay": 0.0,
    }

    def _configure(self, hyperparameters: dict[str, Any]) -> None:
        self.beta1 = _fraction("beta1", hyperparameters["beta1"])
        self.beta2 = _fraction("beta2", hyperparameters["beta2"])
        self.eps = _positive("eps", hyperparameters["eps"])
        self.weight_decay = _non_negative("weight_decay", hyperparameters["weight_decay"])
        self.m = np.zeros(self.num_params, dtype=np.float32)
        self.v = np.zeros(self.num_params, dtype=np.float32)

    def _buffers(self) -> dict[str, FloatVector]:
        return {"m": self.m, "v": self.v}

    def _update(self, params: FloatVector, grad: FloatVector) -> FloatVector:
        g = grad + np.float32(self.weight_decay) * params if self.weight_decay else grad
        b1, b2 = np.float32(self.beta1), np.float32(self.beta2)
        self.m = b1 * self.m + (np.float32(1) - b1) * g
        self.v = b2 * self.v + (np.float32(1) - b2) * g * g
        m_hat = self.m / np.float32(1 - self.beta1**self.steps)
        v_hat = self.v / np.float32(1 - self.beta2**self.steps)
        update = np.float32(self.lr) * m_hat / (np.sqrt(v_hat) + np.float32(self.eps))
        return (params - update).astype(np.float32, copy=False)


OPTIMIZERS: Registry[type[Optimizer]] = Registry("optimizer")
OPTIMIZERS.register("sgd", SGD)
OPTIMIZERS.register("adam", Adam)


def create_optimizer(name: str, num_params: int, **hyperparameters: Any) -> Optimizer:
    """The optimiser ``name`` for ``num_params`` parameters; unknown names list the choices."""
    return OPTIMIZERS.get(name)(num_params, **hyperparameters)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"the value of optimizer.{name} is {value!r}, but must be a number")
    return float(value)


def _positive(name: str, value: Any) -> float:
    number = _number(name, value)
    if number <= 0:
        raise ConfigError(f"the value of optimizer.{name} is {value!r}, but must be > 0")
    return number


def _non_negative(name: str, value: Any) -> float:
    number = _number(name, value)
    if number < 0:
        raise ConfigError(f"the value of optimizer.{name} is {value!r}, but must be >= 0")
    return number


def _fraction(name: str, value: Any) -> float:
    number = _number(name, value)
    if not 0 <= number < 1:
        raise ConfigError(f"the value of optimizer.{name} is {value!r}, but must be in [0, 1)")
    return number


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"the value of optimizer.{name} is {value!r}, but must be true or false")
    return value
