"""One invocation of a training loop: the loop unpacked (signed), called with the trial's
configuration and a ``LoopContext`` for the epochs the coordinator planned, its checkpoint
written by worker 0; the figures the worker turns into a ``SegmentReport``.

Before the call ``torch.manual_seed(seed)``, so every function builds the same initial
weights. An exception in the loop becomes a ``LoopError`` carrying the user's traceback (the
trial fails with it; a rerun would fail the same way).
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from faasml.loop import LOOP_FACTORY, is_loop
from faasml.loop.context import (
    EpochFigures,
    LoopContext,
    LoopPlan,
    checkpoint_bytes,
    load_checkpoint_bytes,
)
from faasml.loop.shipping import shipped_function
from faasml.loop.sync import LoopError, Reduce
from faasml.sync.stores import Store


@dataclass(frozen=True)
class LoopOutcome:
    """What an invocation of a loop ran: each epoch's figures, and where its checkpoint is."""

    epochs: list[EpochFigures]
    checkpoint: str | None
    load_s: float
    """Seconds from the invocation's start to its first epoch (unpacking, the loop's setup)."""
    round_id: int


def loop_config(options: Mapping[str, Any], batch_size: int) -> dict[str, Any]:
    """The configuration a loop is called with: the trial's, with ``batch_size`` (the global
    batch) where the search space has it."""
    config = dict(options.get("config") or {})
    if options.get("batch_in_config"):
        config["batch_size"] = batch_size
    return config


def task_plan(task: Any) -> LoopPlan:
    """The ``LoopPlan`` of a worker's task (``runtime.worker.WorkerTask``): whole epochs from
    ``task.epoch``, on ``task.threads`` torch threads where set."""
    if task.threads:
        torch.set_num_threads(task.threads)
    options, epochs = task.recipe.model_options, max(1, task.epochs)
    return LoopPlan(
        n=task.n,
        worker_id=task.worker_id,
        batch_size=task.recipe.batch_size,
        seed=task.recipe.seed,
        first_epoch=task.epoch,
        epochs=epochs,
        max_epochs=int(options.get("max_epochs") or task.epoch + epochs),
        round_id=task.round_id,
    )


def run_loop(
    options: Mapping[str, Any],
    plan: LoopPlan,
    objects: Store,
    keys: tuple[str | None, str],
    reduce: Reduce | None,
    on_round: Callable[[int], None] | None = None,
) -> LoopOutcome:
    """Run the epochs of ``plan``; ``keys``: the checkpoint to start from (None: the start)
    and the key worker 0 writes the last reported checkpoint to."""
    started = time.perf_counter()
    function = shipped_function(options)
    checkpoint_in, checkpoint_out = keys
    saved = objects.get(checkpoint_in) if checkpoint_in is not None else None
    if checkpoint_in is not None and saved is None:
        raise RuntimeError(f"no checkpoint under {checkpoint_in!r} in {objects.url}")
    plan = replace(plan, checkpoint=load_checkpoint_bytes(saved) if saved is not None else None)
    ctx = LoopContext(plan, reduce, on_round)
    torch.manual_seed(plan.seed)
    call(function, loop_config(options, plan.batch_size), ctx)
    figures = ctx.figures
    if len(figures) < plan.epochs:
        raise LoopError(
            f"the loop returned after {len(figures)} of the {plan.epochs} epochs ctx.epochs() "
            "yielded; it must run each one to its ctx.report"
        )
    key = None
    if plan.worker_id == 0:
        data = ctx.checkpoint_out if ctx.checkpoint_out is not None else saved
        if data is not None:
            objects.put(checkpoint_out, data)
            key = checkpoint_out
    load_s = (ctx.first_epoch_at or time.perf_counter()) - started
    return LoopOutcome(figures, key, load_s, ctx.round_id)


def call(function: Callable[..., Any], config: dict[str, Any], ctx: LoopContext) -> None:
    """``function(config, ctx)``; what it raises becomes a LoopError with its traceback."""
    try:
        result = function(config, ctx)
    except LoopError:
        raise
    except Exception as err:
        if getattr(err, "faasml_sync", False):  # synchronisation failed (a peer, the store)
            raise
        raise LoopError(_user_traceback(err)) from None
    if result is not None:
        raise LoopError(
            f"the training loop returned {type(result).__name__}; a loop returns None (its "
            "results go through ctx.report)"
        )


def _user_traceback(err: BaseException) -> str:
    """'the training loop raised ...' and the traceback from the loop's own frames down."""
    frames = traceback.extract_tb(err.__traceback__)[1:]  # without ``call``'s own frame
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(err), err)
    text = "".join(lines).rstrip()
    return f"the training loop raised {type(err).__name__}: {err}\nTraceback:\n{text}"


def segment_figures(outcome: LoopOutcome, worker_id: int, *, several: bool) -> dict[str, Any]:
    """The ``SegmentReport`` fields of an invocation's figures: worker 0's metrics are the
    trial's (``val`` and ``reported``, per epoch where it ran several); the training loss is
    the metric ``loss`` where the loop reports one, else unknown (None; NaN where a metric is
    not finite, so the trial counts as diverged)."""
    epochs: list[dict[str, Any]] = []
    for figures in outcome.epochs:
        metrics = dict(figures.metrics or {}) if worker_id == 0 else {}
        epochs.append(
            {
                "loss_sum": _loss_sum(figures),
                "samples": figures.rows,
                "compute_s": figures.compute_s,
                "sync_s": figures.sync_s,
                "elapsed_s": figures.elapsed_s,
                "val": metrics,
                "reported": dict(metrics),
            }
        )
    last = epochs[-1]
    return {
        "rounds": sum(f.rounds for f in outcome.epochs),
        "samples": sum(e["samples"] for e in epochs),
        "loss_sum": _total([e["loss_sum"] for e in epochs]),
        "load_s": outcome.load_s,
        "compute_s": sum(e["compute_s"] for e in epochs),
        "sync_s": sum(e["sync_s"] for e in epochs),
        "val": dict(last["val"]),
        "reported": dict(last["reported"]),
        "epochs": epochs if several else [],
    }


def _loss_sum(figures: EpochFigures) -> float | None:
    """The epoch's reported ``loss`` times its rows; None where the loop reported none."""
    metrics = figures.metrics or {}
    if "loss" in metrics:
        return metrics["loss"] * figures.rows
    return None if all(math.isfinite(v) for v in metrics.values()) else math.nan


def _total(sums: list[float | None]) -> float | None:
    """The sum of the epochs' loss sums; None where one is unknown."""
    known = [s for s in sums if s is not None]
    return sum(known) if len(known) == len(sums) else None


__all__ = [
    "LOOP_FACTORY",
    "LoopOutcome",
    "call",
    "checkpoint_bytes",
    "is_loop",
    "loop_config",
    "run_loop",
    "segment_figures",
    "task_plan",
]
