"""The offline estimate's sample run, inside a function (LambdaML-style, ``models.offline``):
the job's own configuration trained for a few epochs on a sample of its training set, with the
loss a training run compares with its target after each epoch.

A built-in model or training function: the first rows of a seeded shuffle of the training set,
the test set's loss after each epoch (the sample's own where there is no test set). A training
loop: the loop as written, its ``ctx.shard`` cut to the sample, the metric ``loss`` it reports.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from faasml.loop import is_loop

SAMPLE_FN = "faasml.runtime.function.sample_run:sample_curve"


def sample_rows(total: int, fraction: float, least: int) -> int:
    """Rows of a sample of ``fraction`` of ``total`` rows, at least ``least`` (all at most)."""
    return max(1, min(total, max(math.ceil(fraction * total), least)))


def sample_curve(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload``: the probe's (its store, data keys, ``recipes``: the job's own first) with
    ``sample``: {fraction, least_rows, epochs}. Returns the loss after each epoch
    (``losses``; None for an epoch whose loss is not known) and the fraction trained on."""
    from faasml.runtime.function.worker import cached_dataset, cached_store
    from faasml.workloads import context

    store = cached_store(payload["object_url"])
    data, _ = cached_dataset(store, payload["train_key"])
    test, _ = cached_dataset(store, payload["test_key"])
    recipe = payload["recipes"][0]
    sample = payload["sample"]
    fraction, least = float(sample["fraction"]), int(sample["least_rows"])
    epochs = int(sample["epochs"])
    context.open_context()  # model code may call faasml.report while it trains, as in a worker
    try:
        if is_loop(recipe.model):
            cap = int(sample.get("max_epochs") or epochs)
            return _loop_curve(recipe, (fraction, least), epochs, cap)
        return _model_curve(recipe, data, test, sample_rows(len(data), fraction, least), epochs)
    finally:
        context.close_context()


def _model_curve(recipe: Any, data: Any, test: Any, rows: int, epochs: int) -> dict[str, Any]:
    """A built-in model's (or training function's) sample run: rounds of the global batch over
    the sample, as many as an epoch of it holds."""
    import numpy as np

    from faasml.runtime.function.probe import train_round
    from faasml.runtime.function.worker import cached_model
    from faasml.workloads import create_optimizer
    from faasml.workloads.data import Dataset

    rng = np.random.default_rng(recipe.seed)
    chosen = rng.permutation(len(data))[:rows]
    part = Dataset(data.features[chosen], data.labels[chosen], data.num_classes)
    scored = test if len(test) else part
    model = cached_model(recipe)
    optimizer = create_optimizer(recipe.optimizer, model.num_params, **recipe.hyperparameters)
    params = model.init_params(recipe.seed)
    size = min(recipe.batch_size, rows)
    losses: list[float | None] = []
    for _ in range(epochs):
        for _ in range(math.ceil(rows / size)):
            params, _, _ = train_round(model, optimizer, params, part, rng, size)
        loss = float(model.evaluate(params, scored.features, scored.labels)["loss"])
        losses.append(loss if math.isfinite(loss) else None)
    return {"losses": losses, "fraction": rows / max(len(data), 1)}


def _loop_curve(recipe: Any, share: tuple[float, int], epochs: int, cap: int) -> dict[str, Any]:
    """A training loop's sample run: the loop on one function, its shard cut to the sample
    (``share``: the fraction, the least rows), for ``epochs`` epochs; its schedules see the
    run's ``max_epochs`` (``cap``)."""
    import torch

    from faasml.loop.context import LoopContext, LoopPlan, Shard
    from faasml.loop.segment import call, loop_config
    from faasml.loop.shipping import shipped_function

    options = recipe.model_options
    function = shipped_function(options)
    fraction, least = share
    plan = LoopPlan(1, 0, recipe.batch_size, recipe.seed, 0, epochs, cap, 0)
    kept: list[tuple[int, int]] = []  # (rows of the sample, rows of the data), per shard

    class SampleContext(LoopContext):
        def shard(self, data: Any) -> Shard:
            whole = super().shard(data)
            rows = sample_rows(whole.total, fraction, least)
            kept.append((rows, whole.total))
            return dataclasses.replace(whole, hi=whole.lo + rows, total=rows)

    ctx = SampleContext(plan, None)
    torch.manual_seed(recipe.seed)
    call(function, loop_config(options, recipe.batch_size), ctx)
    losses: list[float | None] = []
    for figures in ctx.figures:
        value = (figures.metrics or {}).get("loss")
        known = isinstance(value, (int, float)) and math.isfinite(value)
        losses.append(float(value) if known and value is not None else None)
    part = kept[0][0] / max(kept[0][1], 1) if kept else fraction
    return {"losses": losses, "fraction": part}
