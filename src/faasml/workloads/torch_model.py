"""A PyTorch ``nn.Module`` seen through the Model contract (flat float32 vector in and out).

``TorchModel(module_factory, loss_fn, input_shape=..., num_classes=...)`` wraps any module: the
flat vector is copied into the module's parameters with
``torch.nn.utils.vector_to_parameters`` and the gradient read back with the same order as
``parameters_to_vector``. The module's persistent buffers (those ``state_dict`` holds, such as
BatchNorm's running statistics and batch count) are the model's buffer vector (see the Model
contract): float32 values in ``named_buffers`` order; integer buffers travel as float32, exact
below 2**24, and are rounded back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml._imports import optional_import
from faasml.exceptions import WorkloadError
from faasml.workloads._base import FloatVector, Model, accuracy

LossFn = Callable[[Any, Any], Any]
"""loss_fn(outputs, labels) -> scalar tensor: the mean loss of a minibatch."""


def is_torch_module(obj: object) -> bool:
    """True when ``obj`` is a ``torch.nn.Module`` (without importing torch if nobody has)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


class TorchModel(Model):
    """Any ``torch.nn.Module`` as a Model over a flat vector; gradients by autograd.

    ``module_factory()`` builds the module (it is called under ``torch.manual_seed(seed)`` by
    ``init_params``, so initial parameters are deterministic); ``loss_fn(outputs, labels)``
    defaults to mean cross-entropy over class scores.
    """

    def __init__(
        self,
        module_factory: Callable[[], Any],
        loss_fn: LossFn | None = None,
        *,
        input_shape: tuple[int, ...],
        num_classes: int,
        name: str = "torch",
        module: Any = None,
    ) -> None:
        super().__init__(input_shape, num_classes)
        self._torch = optional_import("torch", "torch")
        self.name = name
        self.module_factory = module_factory
        self.loss_fn: LossFn = loss_fn or self._torch.nn.functional.cross_entropy
        self.module = module if module is not None else module_factory()
        if not isinstance(self.module, self._torch.nn.Module):
            raise WorkloadError(
                f"the module factory of '{name}' returned {type(self.module).__name__}, "
                "but must return a torch.nn.Module"
            )
        self._initial: FloatVector | None = None
        self._initial_buffers: FloatVector | None = None
        self._buffers = _persistent_buffers(self.module, name)
        self._num_buffers = int(sum(b.numel() for b in self._buffers))
        self._params = [p for p in self.module.parameters() if p.requires_grad]
        self._num_params = int(sum(p.numel() for p in self._params))
        for p in self._params:
            if p.dtype != self._torch.float32:
                raise WorkloadError(f"model '{name}' has {p.dtype} parameters; use float32")

    @classmethod
    def from_module(
        cls,
        module: Any,
        input_shape: tuple[int, ...],
        num_classes: int,
        *,
        name: str = "torch",
        module_factory: Callable[[], Any] | None = None,
    ) -> TorchModel:
        """Wrap an already built module; ``init_params`` then returns its weights as built
        (whatever the seed), unless ``module_factory`` is given to rebuild it per seed."""
        initial = optional_import("torch", "torch").nn.utils.parameters_to_vector(
            [p for p in module.parameters() if p.requires_grad]
        )
        snapshot = initial.detach().numpy().astype(np.float32).copy()
        model = cls(
            module_factory or (lambda: module),
            input_shape=input_shape,
            num_classes=num_classes,
            name=name,
            module=module,
        )
        if module_factory is None:
            model._initial = snapshot
            model._initial_buffers = model.buffers()
        return model

    @property
    def num_params(self) -> int:
        return self._num_params

    @property
    def num_buffers(self) -> int:
        return self._num_buffers

    def _fresh(self, seed: int) -> Any:
        torch = self._torch
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            return self.module_factory()

    def init_params(self, seed: int) -> FloatVector:
        if self._initial is not None:
            return self._initial.copy()
        fresh = self._fresh(seed)
        vector = self._torch.nn.utils.parameters_to_vector(
            [p for p in fresh.parameters() if p.requires_grad]
        )
        result: FloatVector = vector.detach().numpy().astype(np.float32).copy()
        if result.shape != (self.num_params,):
            raise WorkloadError(
                f"the module factory of '{self.name}' built modules of different sizes "
                f"({result.shape[0]} and {self.num_params} parameters)"
            )
        return result

    def init_buffers(self, seed: int) -> FloatVector:
        if self._initial_buffers is not None:
            return self._initial_buffers.copy()
        if not self._num_buffers:
            return np.zeros(0, dtype=np.float32)
        result = _flatten(self._torch, _persistent_buffers(self._fresh(seed), self.name))
        if result.shape != (self.num_buffers,):
            raise WorkloadError(
                f"the module factory of '{self.name}' built modules with different buffers "
                f"({result.shape[0]} and {self.num_buffers} values)"
            )
        return result

    def buffers(self) -> FloatVector:
        return _flatten(self._torch, self._buffers)

    def load_buffers(self, buffers: NDArray[Any]) -> None:
        super().load_buffers(buffers)
        flat = np.asarray(buffers, dtype=np.float32).reshape(-1)
        offset = 0
        with self._torch.no_grad():
            for buffer in self._buffers:
                part = flat[offset : offset + buffer.numel()].reshape(tuple(buffer.shape))
                value = self._torch.from_numpy(np.array(part, copy=True))
                if not buffer.is_floating_point():
                    value = value.round()
                buffer.copy_(value.to(buffer.dtype))
                offset += buffer.numel()

    def _load(self, params: NDArray[Any]) -> None:
        flat = self.check_params(params)
        vector = self._torch.from_numpy(np.array(flat, dtype=np.float32, copy=True))
        with self._torch.no_grad():
            self._torch.nn.utils.vector_to_parameters(vector, self._params)

    def _inputs(self, features: NDArray[Any], labels: NDArray[np.int64]) -> tuple[Any, Any]:
        self.check_batch(features, labels)
        torch = self._torch
        array = np.asarray(features)
        if np.issubdtype(array.dtype, np.floating):
            array = array.astype(np.float32, copy=False)  # the parameters are float32
        x = torch.from_numpy(np.ascontiguousarray(array))
        return x, torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64))

    def loss_and_grad(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> tuple[float, FloatVector]:
        self._load(params)
        x, y = self._inputs(features, labels)
        self.module.train()
        for p in self._params:
            p.grad = None
        loss = self.loss_fn(self.module(x), y)
        loss.backward()
        torch = self._torch
        grads = [
            p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel())
            for p in self._params
        ]
        grad: FloatVector = torch.cat(grads).detach().numpy().astype(np.float32, copy=True)
        return float(loss.item()), grad

    def evaluate(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> dict[str, float]:
        self._load(params)
        x, y = self._inputs(features, labels)
        self.module.eval()
        with self._torch.no_grad():
            outputs = self.module(x)
            loss = float(self.loss_fn(outputs, y).item())
        return {"loss": loss, "accuracy": accuracy(outputs.detach().numpy(), labels)}


def _persistent_buffers(module: Any, name: str) -> list[Any]:
    """The module's buffers that ``state_dict`` holds, in ``named_buffers`` order."""
    kept = module.state_dict(keep_vars=True)
    found = [buffer for key, buffer in module.named_buffers() if key in kept]
    for buffer in found:
        if buffer.is_complex():
            raise WorkloadError(f"model '{name}' has a complex buffer; only real buffers are kept")
    return found


def _flatten(torch: Any, buffers: list[Any]) -> FloatVector:
    if not buffers:
        return np.zeros(0, dtype=np.float32)
    vector = torch.cat([b.detach().reshape(-1).to(torch.float32) for b in buffers])
    result: FloatVector = vector.numpy().astype(np.float32, copy=True)
    return result
