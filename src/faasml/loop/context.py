"""The ``ctx`` a training loop receives: ``prepare``, ``shard``, ``epochs``, ``batches``,
``report``, ``checkpoint``, ``device``, ``max_epochs`` (the contract; docs/your-own-loop.md).

One invocation of a loop runs whole epochs, ``ctx.epochs()``. ``ctx.shard(data)`` is this
function's contiguous part of the data set (``partition``'s bounds); ``ctx.batches(shard)``
yields, each round, the rows of the *global* batch that lie in the shard
(``workloads.global_batch.part_rounds``), so which rows a round trains on, and the averaged
gradient, do not depend on how many functions train.
"""

from __future__ import annotations

import collections
import io
import math
import numbers
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from faasml.loop.sync import GradientSync, LoopError, PreparedOptimizer, Reduce
from faasml.workloads.global_batch import part_rounds, round_sizes


@dataclass(frozen=True)
class LoopPlan:
    """What one invocation of a loop runs (from the worker's task)."""

    n: int
    worker_id: int
    batch_size: int
    seed: int
    first_epoch: int
    epochs: int
    max_epochs: int
    round_id: int
    checkpoint: dict[str, Any] | None = None


@dataclass
class EpochFigures:
    """One epoch as this function ran it."""

    epoch: int
    metrics: dict[str, float] | None = None
    rows: int = 0
    rounds: int = 0
    compute_s: float = 0.0
    """Seconds of the rounds' computation: each round from the end of the last (its batch
    drawn and gathered, then the loop's step), less its synchronisation."""
    sync_s: float = 0.0
    elapsed_s: float = 0.0


@dataclass
class Shard:
    """This function's contiguous rows [lo, hi) of a data set of ``total`` rows (no copy)."""

    data: Any
    lo: int
    hi: int
    total: int
    collate: Callable[[list[Any]], Any] | None = None

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < len(self):
            raise IndexError(index)
        if isinstance(self.data, tuple):
            return tuple(part[self.lo + index] for part in self.data)
        return self.data[self.lo + index]

    def rows(self, local: Any) -> Any:
        """The batch of the shard's rows ``local`` (indices within the shard)."""
        if isinstance(self.data, tuple):
            index = torch.as_tensor(local + self.lo, dtype=torch.long)
            return tuple(part[index] for part in self.data)
        items = [self.data[int(i) + self.lo] for i in local]
        collate = self.collate or torch.utils.data.default_collate
        return collate(items)


@dataclass
class _State:
    sync: GradientSync | None = None
    prepared: bool = False
    epoch: EpochFigures | None = None
    done: list[EpochFigures] = field(default_factory=list)
    checkpoint: bytes | None = None
    round_id: int = 0
    first_epoch_at: float | None = None


class LoopContext:
    """What a training loop is handed: see the module docstring."""

    def __init__(
        self,
        plan: LoopPlan,
        reduce: Reduce | None,
        on_round: Callable[[int], None] | None = None,
        device: Any = None,
    ) -> None:
        self._plan, self._reduce, self._on_round = plan, reduce, on_round
        self._state = _State(round_id=plan.round_id)
        self.device = device if device is not None else default_device()
        self.max_epochs = plan.max_epochs
        self.checkpoint = plan.checkpoint
        """What the last ``report`` carried as its checkpoint (None at the start)."""
        self.num_functions = plan.n
        self.rank = plan.worker_id

    # ------------------------------------------------------------------ the contract

    def prepare(self, model: Any, optimizer: Any) -> tuple[Any, PreparedOptimizer]:
        """``model`` on ``ctx.device`` and ``optimizer`` wrapped so that each round's
        gradients (and floating persistent buffers) are averaged over the trial's functions."""
        if not isinstance(model, torch.nn.Module):
            raise LoopError(
                f"ctx.prepare(model, optimizer) got model {type(model).__name__}, but model must "
                "be a torch.nn.Module"
            )
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise LoopError(
                f"ctx.prepare(model, optimizer) got optimizer {type(optimizer).__name__}, but it "
                "must be a torch.optim.Optimizer"
            )
        if self._state.prepared:
            raise LoopError("ctx.prepare was called twice; prepare one model and optimiser")
        model.to(self.device)
        if self._plan.n > 1 and self._reduce is not None:
            self._state.sync = GradientSync(model, self._reduce, self._plan.n)
        self._state.prepared = True
        return model, PreparedOptimizer(optimizer, self._state.sync)

    def shard(self, data: Any) -> Shard:
        """This function's contiguous part of ``data``: an ``(x, y)`` pair of tensors or
        arrays, a torch ``Dataset`` or a ``DataLoader`` (its dataset and collate_fn)."""
        collate = None
        if isinstance(data, torch.utils.data.DataLoader):
            collate, data = data.collate_fn, data.dataset
        if isinstance(data, tuple | list) and len(data) == 2:
            parts = tuple(torch.as_tensor(part) for part in data)
            if len(parts[0]) != len(parts[1]):
                raise LoopError(
                    f"ctx.shard((x, y)) got x of {len(parts[0])} rows and y of {len(parts[1])}; "
                    "they must match"
                )
            data, total = parts, len(parts[0])
        elif hasattr(data, "__getitem__") and hasattr(data, "__len__"):
            total = len(data)
        else:
            raise LoopError(
                f"ctx.shard got a {type(data).__name__}, but takes an (x, y) pair of tensors, a "
                "torch Dataset or a DataLoader"
            )
        n, worker = self._plan.n, self._plan.worker_id
        if total < n:
            raise LoopError(f"ctx.shard: {total} rows cannot be split over {n} functions")
        base, extra = divmod(total, n)
        lo = worker * base + min(worker, extra)
        return Shard(data, lo, lo + base + (1 if worker < extra else 0), total, collate)

    def epochs(self) -> Generator[int, None, None]:
        """The epochs this invocation runs (0-based); each must end with ``ctx.report``."""
        plan, state = self._plan, self._state
        if state.first_epoch_at is None:
            state.first_epoch_at = time.perf_counter()
        for epoch in range(plan.first_epoch, plan.first_epoch + plan.epochs):
            figures = EpochFigures(epoch)
            state.epoch = figures
            began = time.perf_counter()
            yield epoch
            figures.elapsed_s = time.perf_counter() - began
            if figures.metrics is None:
                raise LoopError(
                    f"epoch {epoch + 1} ended without ctx.report(metrics): every epoch of "
                    "ctx.epochs() must report"
                )
            state.done.append(figures)
            state.epoch = None

    def batches(self, shard: Shard, batch_size: int | None = None) -> Generator[Any, None, None]:
        """This function's rows of each round of the epoch's global batch, on ``ctx.device``."""
        plan, state = self._plan, self._state
        figures = state.epoch
        if figures is None:
            raise LoopError("ctx.batches is for use inside `for epoch in ctx.epochs():`")
        if not isinstance(shard, Shard):
            raise LoopError(
                f"ctx.batches takes what ctx.shard(data) returned, not a {type(shard).__name__}"
            )
        if plan.n > 1 and not state.prepared:
            raise LoopError(
                f"the loop runs ctx.batches on {plan.n} functions without ctx.prepare(model, "
                "optimizer): call it once before the epochs, so that gradients are averaged"
            )
        size = plan.batch_size if batch_size is None else int(batch_size)
        # A round's computation runs from the end of the last one's: the order drawn and the
        # batch gathered are training work that the probe times with the step.
        mark = time.perf_counter()
        sizes = round_sizes(shard.total, size)
        rounds = part_rounds(
            shard.total, size, seed=plan.seed, epoch=figures.epoch, start=shard.lo, stop=shard.hi
        )
        for index, rows in enumerate(rounds):
            if len(rows) == 0 and plan.n > 1:
                raise LoopError(
                    f"function {plan.worker_id} has no rows in round {index} of a global batch "
                    f"of {size} over {plan.n} functions: use at most {max(1, size // 2)}"
                )
            if self._on_round is not None:
                self._on_round(state.round_id)
            seed_step(plan.seed, plan.worker_id, state.round_id)
            batch = _to_device(shard.rows(rows - shard.lo), self.device)
            if state.sync is not None:
                state.sync.begin(len(rows), int(sizes[index]), state.round_id)
                synced_before = state.sync.sync_s
            yield batch
            if state.sync is not None:
                state.sync.end()
                sync_s = state.sync.sync_s - synced_before
                figures.sync_s += sync_s
                mark += sync_s
            now = time.perf_counter()
            figures.compute_s += now - mark
            mark = now
            figures.rows += len(rows)
            figures.rounds += 1
            state.round_id += 1

    def report(
        self,
        metrics: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        **named: Any,
    ) -> None:
        """End the epoch with its ``metrics`` (any names; worker 0's are the trial's) and a
        ``checkpoint`` (tensors, numbers, strings and containers of them) the next invocation
        gets as ``ctx.checkpoint``."""
        figures = self._state.epoch
        if figures is None:
            raise LoopError(
                "ctx.report records an epoch's metrics at its end, inside `for epoch in "
                "ctx.epochs():`, not in train_fn's body"
            )
        figures.metrics = _numbers({**dict(metrics or {}), **named})
        if checkpoint is not None and self._plan.worker_id == 0:
            self._state.checkpoint = checkpoint_bytes(checkpoint)

    # ------------------------------------------------------------------ for the segment

    @property
    def figures(self) -> list[EpochFigures]:
        return list(self._state.done)

    @property
    def checkpoint_out(self) -> bytes | None:
        """The last checkpoint reported in this invocation (worker 0), else None."""
        return self._state.checkpoint

    @property
    def first_epoch_at(self) -> float | None:
        """``perf_counter`` when the loop first asked for its epochs."""
        return self._state.first_epoch_at

    @property
    def round_id(self) -> int:
        return self._state.round_id


def default_device() -> Any:
    """A GPU where the platform gives this function one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_step(seed: int, worker_id: int, round_id: int) -> None:
    """Seed torch for one round, so a rerun after a fault draws the same dropout and
    augmentation (the GPUs' generators only once CUDA is initialised)."""
    value = ((seed * 1_000_003 + round_id) * 1_009 + worker_id) & (2**63 - 1)
    torch.default_generator.manual_seed(value)
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.manual_seed_all(value)


def checkpoint_bytes(checkpoint: Mapping[str, Any]) -> bytes:
    """``torch.save`` of the checkpoint, checked to load with ``weights_only=True``: by its
    values' types where they are plain (``_plain``), else by loading it back."""
    buffer = io.BytesIO()
    torch.save(dict(checkpoint), buffer)
    data = buffer.getvalue()
    if _plain(checkpoint):
        return data
    try:
        torch.load(io.BytesIO(data), weights_only=True)
    except Exception as err:
        reason = str(err).strip().splitlines()
        detail = next((line for line in reason if "Unsupported global" in line), reason[-1:])
        raise LoopError(
            "ctx.report's checkpoint holds an object torch.load(weights_only=True) refuses "
            f"({''.join(detail).strip()[:200]}); keep tensors, numbers, strings and "
            "dicts/lists of them (state_dict() values)"
        ) from None
    return data


_SCALARS = (int, float, bool, str, type(None))
_CONTAINERS = (dict, collections.OrderedDict, list, tuple)


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` holds only what ``torch.load(weights_only=True)`` always reads back:
    dense CPU or CUDA tensors, numbers, strings and dicts/lists/tuples of them (what
    ``state_dict()`` returns). A check by type, where loading the bytes back costs a
    ``torch.load`` at every report."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is torch.Tensor:
        plain = value.layout == torch.strided and not value.is_quantized
        return bool(plain and value.device.type in ("cpu", "cuda"))
    if kind not in _CONTAINERS or depth > 64:
        return False
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
    return all(_plain(item, depth + 1) for item in items)


def load_checkpoint_bytes(data: bytes) -> dict[str, Any]:
    """A saved checkpoint, never unpickling arbitrary objects."""
    loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    return dict(loaded)


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if (
            not isinstance(key, str)
            or isinstance(value, bool)
            or not isinstance(value, numbers.Real)
        ):
            raise LoopError(
                f"ctx.report got {key!r}: {type(value).__name__}, but metrics must map names "
                "to numbers"
            )
        out[key] = float(value)
    return out


def finite(metrics: Mapping[str, float]) -> bool:
    return all(math.isfinite(v) for v in metrics.values())


def _to_device(batch: Any, device: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True) if batch.device != device else batch
    if isinstance(batch, tuple | list):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch
