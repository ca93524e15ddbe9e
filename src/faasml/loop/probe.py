"""A training loop timed for the job profile (inside the probe's function, as
``runtime.job_probe`` times a built-in model): each configuration's loop runs one epoch cut
short on one function, a few untimed rounds and then timed ones, after which its own code
runs as at any epoch's end (evaluation, logging, ``ctx.report`` with its checkpoint).

What it gives the profile: the training seconds per sample (inside ``ctx.batches``), and the
loop's own seconds per epoch outside the batches as the evaluation's seconds per test sample
of the job's stand-in test set (so the profile prices them once per epoch, as it prices an
evaluation), the vector's size and a checkpoint's save and load.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from faasml.loop.context import LoopContext, LoopPlan, Shard, load_checkpoint_bytes
from faasml.loop.segment import call, loop_config
from faasml.loop.shipping import shipped_function


@dataclass(frozen=True)
class LoopTiming:
    """One configuration's loop as the probe timed it."""

    compute_s_per_sample: float
    outside_s: float
    """The loop's seconds of its epoch outside ``ctx.batches``."""
    checkpoint_s: float
    params: int


class _TimedContext(LoopContext):
    """One epoch whose batches stop after ``warm`` untimed and at least ``least`` timed rounds
    (more until ``measure_s`` of computation, at most ``most``)."""

    def __init__(self, plan: LoopPlan, warm: int, least: int, most: int, measure_s: float):
        super().__init__(plan, None)
        self._limits = (warm, least, most, measure_s)
        self.timed = (0.0, 0)
        self.in_batches_s = 0.0
        self.model: Any = None

    def prepare(self, model: Any, optimizer: Any) -> Any:
        self.model = model
        return super().prepare(model, optimizer)

    def batches(self, shard: Shard, batch_size: int | None = None) -> Generator[Any, None, None]:
        warm, least, most, measure_s = self._limits
        began = time.perf_counter()
        inner = super().batches(shard, batch_size)
        figures = self._state.epoch
        assert figures is not None  # super().batches checked it
        base = (0.0, 0)
        try:
            for index, batch in enumerate(inner):
                if index == warm:
                    base = (figures.compute_s, figures.rows)
                timed = index - warm
                spent = figures.compute_s - base[0]
                if timed >= least and (spent >= measure_s or (most and timed >= most)):
                    break
                yield batch
            self.timed = (figures.compute_s - base[0], figures.rows - base[1])
        finally:
            inner.close()
            self.in_batches_s += time.perf_counter() - began


def time_loop(
    options: Mapping[str, Any], batch_size: int, seed: int, rounds: tuple[int, int, int], s: float
) -> LoopTiming:
    """Run the loop of ``options`` for one shortened epoch on one function; ``rounds``:
    (untimed, least timed, most timed (0: no bound)), ``s`` seconds of timed computation."""
    import torch

    function = shipped_function(options)
    plan = LoopPlan(1, 0, batch_size, seed, 0, 1, int(options.get("max_epochs") or 1), 0)
    ctx = _TimedContext(plan, *rounds, s)
    torch.manual_seed(seed)
    call(function, loop_config(options, batch_size), ctx)
    figures = ctx.figures[0]
    spent, rows = ctx.timed
    checkpoint_s = 0.0
    if ctx.checkpoint_out is not None:
        began = time.perf_counter()
        load_checkpoint_bytes(ctx.checkpoint_out)
        checkpoint_s = time.perf_counter() - began
    model = ctx.model
    params = 0 if model is None else sum(p.numel() for p in model.parameters())
    return LoopTiming(
        compute_s_per_sample=spent / max(rows, 1),
        outside_s=max(figures.elapsed_s - ctx.in_batches_s, 0.0),
        checkpoint_s=checkpoint_s,
        params=int(params),
    )


def probe_loops(
    recipes: list[Any], test_rows: int, rounds: tuple[int, int, int], measure_s: float
) -> dict[str, Any]:
    """The job probe's figures (``job_probe._probe_recipes``'s fields) for a loop job's
    configurations (``recipes``: ``ModelRecipe``s)."""
    share = measure_s / max(len(recipes), 1)
    timings = [time_loop(r.model_options, r.batch_size, r.seed, rounds, share) for r in recipes]
    sampled = timings[1:] if len(timings) > 1 else timings
    first = recipes[0].model_options
    vector = int(first.get("params", 0)) + int(first.get("buffers", 0))
    evals = [t.outside_s / max(test_rows, 1) for t in timings]
    return {
        "compute_s_per_sample": sum(t.compute_s_per_sample for t in sampled) / len(sampled),
        "config_compute_s": [t.compute_s_per_sample for t in timings],
        "config_eval_s": evals,
        "eval_s_per_sample": sum(evals[1:] or evals) / len(evals[1:] or evals),
        "params": timings[0].params,
        "model_mb": vector * 4 / 1e6,
        "checkpoint_s": timings[0].checkpoint_s,
    }


__all__ = ["LoopTiming", "probe_loops", "time_loop"]
