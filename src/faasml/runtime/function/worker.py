"""The worker function: one invocation trains one segment of an epoch (or several whole
epochs, ``WorkerTask.epochs``) for one worker.

SMLT §4.1: a worker loads its data partition from the object store, iterates minibatches, runs
the model's training step, synchronises the gradient through the scheme, and at the end of
the segment worker 0 checkpoints (parameters, optimiser state, data position) and evaluates.
The recipe's batch size is the global batch B (``workloads.global_batch``): an epoch has
max(1, ⌊D/B⌋) rounds whatever n is, round r's rows depend only on (seed, epoch, D, B), and each
worker trains on those inside its partition, scaling its mean gradient by its share of the
round so that the scheme's mean is the global batch's gradient. So the same job trains the
same model (to float rounding) on 1, 2 or 4 functions, and a segment rerun from its checkpoint
computes the same model bit for bit. A model with buffers (BatchNorm statistics) sends them,
scaled alike, with its gradient as one vector, so each round averages both; every worker then
continues from the same buffers, and the checkpoint keeps them. BatchNorm normalises over each
worker's own rows, so such a model is invariant to n only in expectation.

Warm instances keep the store client, the model and the partition in memory (as a warm
function keeps its globals), so only cold starts pay for loading them.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from faasml.loop import KEY_OPTION, is_loop
from faasml.runtime.function.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from faasml.runtime.function.faults import Fault as Fault
from faasml.runtime.function.faults import inject_fault, start_late
from faasml.runtime.function.heartbeat import HEARTBEAT, Heartbeat, await_peers
from faasml.runtime.function.task import ModelRecipe as ModelRecipe
from faasml.runtime.function.task import SegmentReport as SegmentReport
from faasml.runtime.function.task import WorkerTask as WorkerTask
from faasml.sync.schemes import SCHEME_CLASSES, SyncScheme
from faasml.sync.stores import Store, StoreStats, open_store
from faasml.workloads import Model, Optimizer, context, create_model, create_optimizer, global_batch
from faasml.workloads.data import Dataset, dataset_from_bytes, partition_bounds

# Warm state of this instance (a function's globals survive between warm invocations).
_STORES: dict[str, Store] = {}
_DATA: dict[str, Dataset] = {}
_MODELS: dict[str, Model] = {}


def _store(url: str) -> Store:
    if url not in _STORES:
        _STORES[url] = open_store(url)
    return _STORES[url]


def _dataset(store: Store, key: str) -> tuple[Dataset, bool]:
    if key in _DATA:
        return _DATA[key], False
    value = store.get(key)
    if value is None:
        raise RuntimeError(f"no data partition under {key!r} in {store.url}")
    if len(_DATA) > 8:
        _DATA.clear()
    _DATA[key] = dataset_from_bytes(value)
    return _DATA[key], True


def _model(recipe: ModelRecipe) -> Model:
    key = repr((recipe.model, sorted(recipe.model_options.items()), recipe.input_shape))
    if key not in _MODELS:
        if KEY_OPTION in recipe.model_options and not is_loop(recipe.model):
            # a train_fn sent by reference: fetched (once per process) before it is built
            from faasml.loop.shipping import shipped_function

            shipped_function(recipe.model_options)
        _MODELS[key] = create_model(
            recipe.model, recipe.input_shape, recipe.num_classes, **dict(recipe.model_options)
        )
    return _MODELS[key]


# What a probe inside a function shares with the worker's warm state.
cached_store = _store
cached_dataset = _dataset
cached_model = _model


def _stats(stats: StoreStats, before: StoreStats) -> dict[str, int]:
    now = vars(stats)
    return {key: int(now[key] - getattr(before, key)) for key in now}


@dataclass
class _Segment:
    """A segment's worker as it trains: what it loaded, the model's state, its counters."""

    started: float
    objects: Store
    sync_store: Store
    object_before: StoreStats
    sync_before: StoreStats
    data: Dataset
    cold_load: bool
    model: Model
    optimizer: Optimizer
    scheme: SyncScheme
    params: Any
    buffers: Any
    load_s: float
    total: int
    """D: rows of the whole training set (every partition's)."""
    first: int
    """The global index of this worker's partition's first row."""
    rounds: int
    """Rounds of a whole epoch: max(1, ⌊D/B⌋)."""
    stop: int
    """The round the segment stops before."""
    epochs: int
    round_id: int
    compute_s: float = 0.0
    sync_s: float = 0.0
    loss_sum: float = 0.0
    samples: int = 0


def run_segment(task: WorkerTask) -> SegmentReport:
    """Train rounds [start_batch, stop_batch) of ``task.epoch`` as worker ``task.worker_id``."""
    start_late(task.fault, task.worker_id)
    if is_loop(task.recipe.model):  # the user's own loop: whole epochs of its code
        return _loop_segment(task)
    seg = _load_segment(task)
    context.open_context()
    heartbeat = HEARTBEAT
    heartbeat.start(seg.objects, f"{task.namespace}/hb/w{task.worker_id}")
    try:
        await_peers(seg.objects, task)
        per_epoch, val = _train_epochs(task, seg, heartbeat)
    finally:
        heartbeat.stop()
    seg.epochs = len(per_epoch) or seg.epochs  # fewer than asked where it diverged
    return _finish_segment(task, seg, per_epoch, val)


def _loop_segment(task: WorkerTask) -> SegmentReport:
    """A segment of a training loop (``faasml.loop``): its epochs run in the user's code, each
    round's gradient averaged through the task's scheme, worker 0's reports the trial's."""
    from faasml.loop.segment import run_loop, segment_figures, task_plan

    started, recipe = time.monotonic(), task.recipe
    objects, sync_store = _store(task.object_url), _store(task.sync_url)
    object_before, sync_before = objects.stats.copy(), sync_store.stats.copy()
    scheme = SCHEME_CLASSES.get(task.scheme)(
        sync_store, task.n, f"{task.namespace}/sync", timeout_s=task.sync_timeout_s
    )

    def on_round(round_id: int) -> None:
        HEARTBEAT.round_id = round_id
        dying = inject_fault(task.fault, task.worker_id, round_id)
        while dying:  # the injected kill is on its way
            time.sleep(1.0)

    HEARTBEAT.start(objects, f"{task.namespace}/hb/w{task.worker_id}")
    try:
        await_peers(objects, task)
        outcome = run_loop(
            recipe.model_options,
            task_plan(task),
            objects,
            (task.checkpoint, task.checkpoint_out),
            lambda round_id, vector: scheme.reduce(task.worker_id, round_id, vector),
            on_round,
        )
    finally:
        HEARTBEAT.stop()
    figures = segment_figures(outcome, task.worker_id, several=task.epochs > 1)
    return SegmentReport(
        worker_id=task.worker_id,
        epoch=task.epoch,
        elapsed_s=time.monotonic() - started,
        epoch_done=True,
        batch_size=recipe.batch_size,
        object_stats=_stats(objects.stats, object_before),
        sync_stats=_stats(sync_store.stats, sync_before),
        checkpoint=outcome.checkpoint,
        pid=os.getpid(),
        **figures,
    )


def _load_segment(task: WorkerTask) -> _Segment:
    """The worker's stores, partition, model, optimiser and scheme, from the task's
    checkpoint (or the seed), and how many rounds and epochs the segment trains."""
    started = time.monotonic()
    if task.threads:
        try:
            import torch

            torch.set_num_threads(task.threads)
        except ImportError:  # pragma: no cover - numpy models need no torch
            pass
    objects, sync_store = _store(task.object_url), _store(task.sync_url)
    object_before, sync_before = objects.stats.copy(), sync_store.stats.copy()
    recipe = task.recipe
    data, cold_load = _dataset(objects, f"{task.data_prefix}/n{task.n}/part-{task.worker_id}")
    model = _model(recipe)
    name, hyperparameters = model.own_optimizer() or (recipe.optimizer, recipe.hyperparameters)
    optimizer = create_optimizer(name, model.num_params, **hyperparameters)
    if task.checkpoint is None:
        params, buffers = model.init_params(recipe.seed), model.init_buffers(recipe.seed)
    else:
        state = load_checkpoint(objects, task.checkpoint)
        params, buffers = state.params, state.buffers
        optimizer.load_bytes(state.optimizer)
    if model.num_buffers > 0:
        model.load_buffers(buffers)
    scheme = SCHEME_CLASSES.get(task.scheme)(
        sync_store, task.n, f"{task.namespace}/sync", timeout_s=task.sync_timeout_s
    )
    load_s = time.monotonic() - started

    total = _total_samples(task, len(data))
    first, _ = partition_bounds(total, task.worker_id, task.n)
    rounds = global_batch.rounds_per_epoch(total, recipe.batch_size)
    stop = rounds if task.stop_batch is None else min(task.stop_batch, rounds)
    epochs = max(1, task.epochs) if task.start_batch == 0 and stop >= rounds else 1
    return _Segment(
        started,
        objects,
        sync_store,
        object_before,
        sync_before,
        data,
        cold_load,
        model,
        optimizer,
        scheme,
        params,
        buffers,
        load_s,
        total,
        first,
        rounds,
        stop,
        epochs,
        task.round_id,
    )


def _train_epochs(
    task: WorkerTask, seg: _Segment, heartbeat: Heartbeat
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The segment's epochs (one, or several whole ones); for several, each one's figures and
    evaluation, and the last evaluation."""
    per_epoch: list[dict[str, Any]] = []
    val: dict[str, float] = {}
    for epoch in range(task.epoch, task.epoch + seg.epochs):
        began, first = time.monotonic(), (seg.compute_s, seg.sync_s, seg.loss_sum, seg.samples)
        _train_rounds(task, seg, heartbeat, epoch)
        if seg.epochs == 1:
            break
        # An epoch of several ends: worker 0 evaluates it, as a segment's end would.
        val = _evaluate(task, seg.objects, seg.model, seg.params) if task.worker_id == 0 else {}
        if (
            seg.model.num_buffers > 0
        ):  # the next epoch starts from the buffers a checkpoint would hold
            seg.model.load_buffers(seg.buffers)
        per_epoch.append(
            {
                "loss_sum": seg.loss_sum - first[2],
                "samples": seg.samples - first[3],
                "compute_s": seg.compute_s - first[0],
                "sync_s": seg.sync_s - first[1],
                "elapsed_s": time.monotonic() - began,
                "val": val,
                "reported": context.close_context(),
            }
        )
        context.open_context()
        if task.stop_diverged and not np.isfinite(seg.params).all():
            break  # diverged: the coordinator trains this trial no further
    return per_epoch, val


def _train_rounds(task: WorkerTask, seg: _Segment, heartbeat: Heartbeat, epoch: int) -> None:
    """The segment's rounds of ``epoch``: each a gradient step on this worker's rows of the
    round's global batch, weighted by its share and synchronised through the scheme."""
    recipe, data, model = task.recipe, seg.data, seg.model
    size, with_buffers = model.num_params, model.num_buffers > 0
    params, buffers, round_id = seg.params, seg.buffers, seg.round_id
    compute_s, sync_s, loss_sum, samples = seg.compute_s, seg.sync_s, seg.loss_sum, seg.samples
    rows = global_batch.part_rounds(
        seg.total,
        recipe.batch_size,
        seed=recipe.seed,
        epoch=epoch,
        start=seg.first,
        stop=seg.first + len(data),
    )
    sizes = global_batch.round_sizes(seg.total, recipe.batch_size)
    for batch in range(task.start_batch if epoch == task.epoch else 0, seg.stop):
        heartbeat.round_id = round_id
        dying = inject_fault(task.fault, task.worker_id, round_id)
        chosen = rows[batch] - seg.first
        t0 = time.monotonic()
        loss, vector = _weighted_gradient(task, seg, params, chosen, int(sizes[batch]), round_id)
        t1 = time.monotonic()
        mean = seg.scheme.reduce(task.worker_id, round_id, vector)
        while dying:  # the injected kill is on its way: this round is the worker's last
            time.sleep(1.0)
        t2 = time.monotonic()
        if with_buffers:
            buffers = mean[size:]
            model.load_buffers(buffers)
        params = seg.optimizer.step(params, mean[:size])
        compute_s += (t1 - t0) + (time.monotonic() - t2)
        sync_s += t2 - t1
        loss_sum += loss * len(chosen)
        samples += len(chosen)
        round_id += 1
    seg.params, seg.buffers, seg.round_id = params, buffers, round_id
    seg.compute_s, seg.sync_s, seg.loss_sum, seg.samples = compute_s, sync_s, loss_sum, samples


def _weighted_gradient(
    task: WorkerTask, seg: _Segment, params: Any, chosen: Any, round_size: int, round_id: int
) -> tuple[float, Any]:
    """This worker's mean loss over its rows ``chosen`` of a round, and its gradient (with the
    model's buffers after the step, if any) scaled by ``share``, so that the scheme's mean
    of the n vectors is the round's global-batch gradient. No rows: zeros, weight 0."""
    model = seg.model
    length = model.num_params + model.num_buffers
    if len(chosen) == 0:
        return 0.0, np.zeros(length, dtype=np.float32)
    seed_step(task.recipe.seed, task.worker_id, round_id)
    loss, grad = model.loss_and_grad(params, seg.data.features[chosen], seg.data.labels[chosen])
    vector = np.asarray(grad, dtype=np.float32)
    if model.num_buffers > 0:  # the updated buffers travel with the gradient and are averaged
        vector = np.concatenate([vector, model.buffers()])
    weight = global_batch.share(len(chosen), task.n, round_size)
    if weight != 1.0:  # one worker (or a whole round) keeps its vector bit for bit
        vector = vector * np.float32(weight)
    return float(loss), vector


def _finish_segment(
    task: WorkerTask, seg: _Segment, per_epoch: list[dict[str, Any]], val: dict[str, float]
) -> SegmentReport:
    """Worker 0 checkpoints where the segment stopped (and evaluates a single epoch's end);
    every worker reports its figures."""
    epoch_done = seg.stop >= seg.rounds
    checkpoint_key: str | None = None
    if task.worker_id == 0:
        last_epoch = task.epoch + seg.epochs - 1
        next_epoch, next_batch = (last_epoch + 1, 0) if epoch_done else (task.epoch, seg.stop)
        save_checkpoint(
            seg.objects,
            task.checkpoint_out,
            Checkpoint(
                seg.params,
                seg.optimizer.to_bytes(),
                next_epoch,
                next_batch,
                seg.round_id,
                buffers=seg.buffers,
            ),
        )
        checkpoint_key = task.checkpoint_out
        if epoch_done and not per_epoch:  # one epoch: evaluated here, not in the loop
            val = _evaluate(task, seg.objects, seg.model, seg.params)
    reported = context.close_context()
    return SegmentReport(
        worker_id=task.worker_id,
        epoch=task.epoch,
        rounds=seg.stop - task.start_batch + (seg.epochs - 1) * seg.rounds,
        samples=seg.samples,
        loss_sum=seg.loss_sum,
        load_s=seg.load_s,
        compute_s=seg.compute_s,
        sync_s=seg.sync_s,
        elapsed_s=time.monotonic() - seg.started,
        epoch_done=epoch_done,
        batch_size=task.recipe.batch_size,
        object_stats=_stats(seg.objects.stats, seg.object_before),
        sync_stats=_stats(seg.sync_store.stats, seg.sync_before),
        val=val,
        checkpoint=checkpoint_key,
        pid=os.getpid(),
        cold_load=seg.cold_load,
        reported=reported,
        epochs=per_epoch,
    )


def _evaluate(task: WorkerTask, objects: Store, model: Model, params: Any) -> dict[str, float]:
    """The model's scores on the test set (empty when there is none or ``task.evaluate`` is
    off)."""
    if not task.evaluate:
        return {}
    test, _ = _dataset(objects, f"{task.data_prefix}/test")
    if not len(test):
        return {}
    scores = model.evaluate(params, test.features, test.labels)
    return {key: float(value) for key, value in scores.items()}


def seed_step(seed: int, worker_id: int, round_id: int) -> None:
    """Seed torch's generator for one step (when torch is loaded), so random layers such as
    dropout draw the same numbers when a segment is rerun from its checkpoint.

    The CPU generator alone, and the GPUs' only once CUDA is initialised: ``torch.manual_seed``
    also queries every accelerator back-end on every call, a cost per round that the job
    probe's timings do not hold, so the rounds would run slower than they were priced."""
    torch = sys.modules.get("torch")
    if torch is not None:
        value = ((seed * 1_000_003 + round_id) * 1_009 + worker_id) & (2**63 - 1)
        torch.default_generator.manual_seed(value)
        if torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(value)


def _total_samples(task: WorkerTask, own: int) -> int:
    """D, the rows of the whole training set, as the coordinator stored it beside the n
    partitions (one partition of one worker is the whole set)."""
    meta = _store(task.object_url).get(f"{task.data_prefix}/n{task.n}/samples")
    if meta is not None:
        return int(meta.decode())
    if task.n == 1:
        return own
    raise RuntimeError(f"no sample count under {task.data_prefix}/n{task.n}/samples")
