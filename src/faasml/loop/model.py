"""A training loop as a job: what ``faasml.Tuner`` learns of it by calling it once, and the
``Model`` the planner and coordinator see (its synchronised vector's size; it never trains:
workers run the loop itself, ``loop.segment``).

Which functions are loops: ``train_fn(config, ctx)`` is called once under
``torch.manual_seed(seed)`` with a probing ``ctx``. One that returns ``TorchTrainable`` is a
training function (today's path, the result is kept); one that iterates ``ctx.epochs()`` is a
loop: the probe stops it there, having seen the model it prepared and the data it sharded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from faasml.loop.context import LoopContext, LoopPlan, Shard
from faasml.loop.sync import LoopError, PreparedOptimizer
from faasml.workloads import Model
from faasml.workloads.function_model import TorchTrainable, function_structure


@dataclass(frozen=True)
class LoopShape:
    """What the probe saw of a loop: its synchronised vector and its data set's rows."""

    params: int
    """Trainable parameters (0 where it did not call ``ctx.prepare``)."""
    buffers: int
    """Floating persistent buffer values averaged with the gradient (BatchNorm statistics)."""
    samples: int
    """D: the rows of the data set it shards."""
    structure: str
    """A digest of its code and model (the profile cache's key)."""


class _ProbeStop(BaseException):
    """Ends the probing call at ``ctx.epochs()`` (a BaseException: the loop's own
    ``except Exception`` does not swallow it)."""


class _ProbeContext(LoopContext):
    def __init__(self, seed: int, batch_size: int) -> None:
        super().__init__(LoopPlan(1, 0, batch_size, seed, 0, 1, 1, 0), None)
        self.model: Any = None
        self.samples: int | None = None

    def prepare(self, model: Any, optimizer: Any) -> tuple[Any, PreparedOptimizer]:
        prepared = super().prepare(model, optimizer)
        self.model = model
        return prepared

    def shard(self, data: Any) -> Shard:
        part = super().shard(data)
        self.samples = part.total
        return part

    def epochs(self) -> Any:
        raise _ProbeStop


class _Config(dict[str, Any]):
    """The probing call's configuration: ``config["batch_size"]`` answers where the search
    space has it (a loop's config holds it), yet a training function's config, which does
    not, compares and copies without it."""

    def __init__(self, config: Mapping[str, Any], batch_size: int | None) -> None:
        super().__init__(config)
        self._batch_size = batch_size

    def __missing__(self, key: str) -> Any:
        if key == "batch_size" and self._batch_size is not None:
            return self._batch_size
        raise KeyError(key)


def inspect_train_fn(
    function: Callable[..., Any],
    config: Mapping[str, Any],
    seed: int,
    batch_size: int,
    batch_in_config: bool = False,
) -> TorchTrainable | LoopShape:
    """Call ``function(config, ctx)`` once: its ``TorchTrainable`` (checked), or the shape of
    the loop it is; else a LoopError naming what it did."""
    ctx = _ProbeContext(seed, batch_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        try:
            result = function(_Config(config, batch_size if batch_in_config else None), ctx)
        except _ProbeStop:
            return _shape(function, ctx)
    if isinstance(result, TorchTrainable):
        return result.check()
    if result is None:
        raise LoopError(
            "train_fn returned None without iterating ctx.epochs(): a training loop runs "
            "`for epoch in ctx.epochs():` (docs/your-own-loop.md); a training function "
            "returns faasml.TorchTrainable"
        )
    raise LoopError(
        f"train_fn returned {type(result).__name__}, but must return "
        "faasml.TorchTrainable(model=..., train=..., optimizer=..., lr=...), or be a training "
        "loop that iterates ctx.epochs() and returns None"
    )


def _shape(function: Callable[..., Any], ctx: _ProbeContext) -> LoopShape:
    if ctx.samples is None:
        raise LoopError(
            "the training loop reached ctx.epochs() without ctx.shard(data): faasml splits the "
            "data and plans from its size, so shard it before the epochs"
        )
    model = ctx.model if ctx.model is not None else torch.nn.Module()
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buffers = sum(
        b.numel()
        for name, b in model.named_buffers()
        if b.is_floating_point() and name in model.state_dict()
    )
    structure = function_structure(function, TorchTrainable(model=model, train=None))
    return LoopShape(int(params), int(buffers), int(ctx.samples), structure)


class LoopModel(Model):
    """A loop's model as the planner and coordinator see it: the size of the vector it
    synchronises. It never trains here: the workers run the loop."""

    def __init__(self, params: int, buffers: int, name: str) -> None:
        super().__init__((1,), 2)
        self._params, self._buffers, self.name = int(params), int(buffers), name

    @property
    def num_params(self) -> int:
        return self._params

    @property
    def num_buffers(self) -> int:
        return self._buffers

    def init_params(self, seed: int) -> NDArray[np.float32]:
        return np.zeros(self._params, dtype=np.float32)

    def init_buffers(self, seed: int) -> NDArray[np.float32]:
        return np.zeros(self._buffers, dtype=np.float32)

    def loss_and_grad(
        self, params: Any, features: Any, labels: Any
    ) -> tuple[float, NDArray[np.float32]]:
        raise LoopError("a training loop trains in its own code, not through Model.loss_and_grad")

    def evaluate(self, params: Any, features: Any, labels: Any) -> dict[str, float]:
        raise LoopError("a training loop evaluates in its own code (ctx.report)")


def loop_model(**options: Any) -> LoopModel:
    """The job's model factory for a loop (``segment.LOOP_FACTORY``)."""
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return LoopModel(
            int(options["params"]), int(options["buffers"]), str(options.get("label", "loop"))
        )
    raise LoopError("a loop job's model options must hold params and buffers (whole numbers)")


__all__ = ["LoopModel", "LoopShape", "inspect_train_fn", "loop_model"]
