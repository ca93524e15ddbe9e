"""Gradient averaging under the user's own optimiser (``ctx.prepare``).

Every trainable parameter gets a post-accumulate-grad hook; once each one's gradient of a
backward pass has arrived, the gradients (scaled by ``share(c, n, b)``, so the plain mean of
the n functions' vectors is the gradient of the whole global batch) and the model's floating
persistent buffers (BatchNorm statistics, plain mean) travel as one vector through the
trial's scheme and are written back. Code between ``backward()`` and ``step()``, such as
``clip_grad_norm_``, therefore sees the averaged gradient, so clipping does not depend on n.
``PreparedOptimizer.step`` syncs first where the hooks did not (a parameter unused in the
forward pass: its gradient counts as zero), then steps the user's optimiser.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from faasml.workloads.function_model import TrainFunctionError
from faasml.workloads.global_batch import share

Reduce = Callable[[int, Any], Any]
"""``reduce(round_id, vector)``: the mean of the n functions' float32 vectors for the round."""


class LoopError(TrainFunctionError):
    """A training loop broke the loop contract or raised; the trial fails with this message
    (no restart: a rerun would fail the same way)."""


class GradientSync:
    """Averages one round's gradients and buffers over the trial's functions."""

    def __init__(self, model: Any, reduce: Reduce, n: int) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = [
            b
            for name, b in model.named_buffers()
            if b.is_floating_point() and _persistent(model, name)
        ]
        self._reduce, self._n = reduce, n
        self._arrived: set[int] = set()
        self._round: tuple[int, int, int] | None = None
        """(rows here c, rows of the round b, round id) of the round in progress."""
        self.synced = False
        self.sync_s = 0.0
        for param in self.params:
            param.register_post_accumulate_grad_hook(self._hook)

    def begin(self, count: int, size: int, round_id: int) -> None:
        """A round starts: this function trains ``count`` of its ``size`` rows."""
        self._round, self._arrived, self.synced = (count, size, round_id), set(), False

    def _hook(self, param: Any) -> None:
        if self._round is None:
            return  # a backward outside ctx.batches (e.g. a probe of the user's own)
        if self.synced:
            raise LoopError(
                "a second backward() in one round of ctx.batches on more than one function: "
                "faasml averages one gradient per round (for gradient accumulation, raise "
                "batch_size instead)"
            )
        self._arrived.add(id(param))
        if len(self._arrived) == len(self.params):
            self.sync()

    def sync(self) -> None:
        """Average this round's gradients (None counts as zero) and buffers over the functions."""
        if self._round is None or self.synced:
            return
        count, size, round_id = self._round
        began = time.perf_counter()
        with torch.no_grad():
            parts = [
                (p.grad.detach().reshape(-1) if p.grad is not None else torch.zeros(p.numel()))
                .to("cpu", torch.float32)
                .mul(share(count, self._n, size))
                for p in self.params
            ]
            parts += [b.detach().reshape(-1).to("cpu", torch.float32) for b in self.buffers]
            vector = torch.cat(parts).numpy() if parts else np.zeros(0, np.float32)
            try:
                reduced = self._reduce(round_id, vector)
            except Exception as err:  # the store's or a peer's, not the loop's: a restart may do
                err.faasml_sync = True  # type: ignore[attr-defined]
                raise
            mean = torch.from_numpy(np.asarray(reduced, np.float32))
            at = 0
            for param in self.params:
                part = mean[at : at + param.numel()].view_as(param)
                if param.grad is None:
                    param.grad = part.to(param.device, param.dtype).clone()
                else:
                    param.grad.copy_(part)
                at += param.numel()
            for buffer in self.buffers:
                buffer.copy_(mean[at : at + buffer.numel()].view_as(buffer))
                at += buffer.numel()
        self.synced = True
        self.sync_s += time.perf_counter() - began

    def end(self) -> None:
        """The round's batch is done: its gradient must have been averaged (``opt.step()``)."""
        if self._round is not None and not self.synced:
            raise LoopError(
                f"round {self._round[2]} of ctx.batches ended without opt.step(): on more than "
                "one function every round must step the prepared optimiser"
            )
        self._round = None


def _persistent(model: Any, name: str) -> bool:
    """Whether buffer ``name`` is in the module's state_dict (not registered persistent=False)."""
    owner_name, _, leaf = name.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    return leaf not in getattr(owner, "_non_persistent_buffers_set", set())


class PreparedOptimizer(torch.optim.Optimizer):
    """The user's optimiser, whose ``step()`` first averages the round's gradients (where the
    hooks have not yet); everything else (``param_groups``, ``state_dict``, ``zero_grad``, an
    LR scheduler on it) is the wrapped optimiser's."""

    def __init__(self, optimizer: Any, sync: GradientSync | None) -> None:
        # Not Optimizer.__init__: this object holds no parameters of its own.
        self.__dict__["optimizer"] = optimizer
        self.__dict__["_sync"] = sync

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["optimizer"], name)

    @property
    def param_groups(self) -> Any:  # type: ignore[override]
        return self.optimizer.param_groups

    @property
    def state(self) -> Any:  # type: ignore[override]
        return self.optimizer.state

    @property
    def defaults(self) -> Any:  # type: ignore[override]
        return self.optimizer.defaults

    def step(self, closure: Any = None) -> Any:
        if self._sync is not None:
            self._sync.sync()
        return self.optimizer.step() if closure is None else self.optimizer.step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> Any:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: Any) -> None:
        self.optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group: Any) -> None:
        raise LoopError("add_param_group after ctx.prepare: add every group before it")

    def __repr__(self) -> str:
        return f"Prepared({self.optimizer!r})"

    def __getstate__(self) -> Any:
        return self.__dict__

    def __setstate__(self, state: Any) -> None:
        self.__dict__.update(state)
