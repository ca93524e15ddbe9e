"""Built-in workloads: shipped profiles for planning (and, later, models and data loaders)."""

from __future__ import annotations

import functools
import importlib
from typing import Any

from faasml.exceptions import WorkloadError
from faasml.registry import Registry
from faasml.workloads._base import (
    FloatVector,
    Model,
    ModelFactory,
    check_options,
    evaluate_in_batches,
)
from faasml.workloads.data import Dataset, partition
from faasml.workloads.optim import OPTIMIZERS, Optimizer, create_optimizer

MODELS: Registry[ModelFactory] = Registry("model")
"""Built-in models by name; the PyTorch ones are imported only when chosen."""
MODELS.register("logistic-regression", "faasml.workloads.linear:LogisticRegression")
MODELS.register("svm", "faasml.workloads.linear:LinearSVM")
MODELS.register("mlp", "faasml.workloads.nets:mlp")
MODELS.register("mobilenet-small", "faasml.workloads.nets:mobilenet_small")
MODELS.register("resnet-small", "faasml.workloads.nets:resnet_small")
MODELS.register("transformer-small", "faasml.workloads.nets:transformer_small")
MODELS.register("windsr", "faasml.workloads.windsr.model:windsr")
MODELS.register("windsr-srcnn", "faasml.workloads.windsr.model:srcnn")


def create_model(
    name: str, input_shape: tuple[int, ...], num_classes: int, **options: Any
) -> Model:
    """Build model ``name`` for data of ``input_shape`` with ``num_classes`` classes.

    ``name`` is a built-in (``MODELS.names()``) or ``"module.path:factory"``: a user factory
    called as ``factory(**options)`` that returns a ``Model`` or a ``torch.nn.Module`` (wrapped
    in ``TorchModel`` with cross-entropy loss).
    """
    if ":" not in name:
        factory = MODELS.get(name)
        check_options(f"model '{name}'", factory, options, skip=("input_shape", "num_classes"))
        return factory(tuple(input_shape), num_classes, **options)
    module_name, _, attribute = name.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as err:
        raise WorkloadError(f"cannot load model factory '{name}': {err}") from None
    check_options(f"model '{name}'", factory, options, skip=())
    built = factory(**options)
    if isinstance(built, Model):
        return built
    from faasml.workloads.torch_model import TorchModel, is_torch_module

    if is_torch_module(built):  # init_params(seed) rebuilds it under torch.manual_seed(seed)
        return TorchModel(
            functools.partial(factory, **options),
            input_shape=tuple(input_shape),
            num_classes=num_classes,
            name=name,
            module=built,
        )
    raise WorkloadError(
        f"model factory '{name}' returned {type(built).__name__}, "
        "but must return a faasml Model or a torch.nn.Module"
    )


__all__ = [
    "MODELS",
    "OPTIMIZERS",
    "Dataset",
    "FloatVector",
    "Model",
    "ModelFactory",
    "Optimizer",
    "check_options",
    "create_model",
    "create_optimizer",
    "evaluate_in_batches",
    "partition",
]
