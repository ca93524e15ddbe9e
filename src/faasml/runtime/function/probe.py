"""The job profile's probe: what runs inside a function while ``job_profile.measure_job``
measures a job (every model configuration built and trained a few rounds, the first one's
compute, evaluation and checkpoint timed, the process's peak resident memory).

A probe may run in a *group* of k functions started together (payload ``group``: the store
prefix, k, this function's index), as a stage runs k trials side by side: once all k are up
they time the same training rounds at once (``side_by_side_s_per_sample``); the others
return and function 0 measures alone, so the profile holds what sharing the machine costs,
measured back to back with the solo figure (the others bill no waiting for it)."""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from faasml.loop import is_loop

PEAK_ROUNDS = 3
"""Training rounds of each model configuration while its footprint is measured."""
GROUP_WAIT_S = 120.0
"""Longest a function of a probe group waits for the others (a cold start on a busy machine)."""
CHECKPOINT_TIMINGS = 5
"""Checkpoint saves and loads timed at most (their median is the profile's)."""
CHECKPOINT_TIMING_S = 0.3
"""Seconds after which no further checkpoint is timed (a large model's takes long)."""
WARM_ROUNDS = 2
"""Untimed rounds before the compute measurement (a framework sets up its kernels on the
first calls, which a real epoch pays once)."""
_SERVED = [0]
"""Probe invocations this process has served (0: a fresh function, whose first call pays the
job's imports and set-up)."""


def _reset_peak() -> bool:
    """Start this invocation's peak resident memory afresh (Linux: ``clear_refs`` 5 resets
    VmHWM), so a warm function that ran a larger job before does not lend its peak."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _peak_rss_mb(reset: bool) -> float:
    """Peak resident memory in MB: VmHWM since the reset, else the process's ``ru_maxrss``
    (Linux reports KB, macOS bytes)."""
    if reset:
        try:
            with open("/proc/self/status") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except (OSError, ValueError, IndexError):
            pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def probe_job(payload: dict[str, Any]) -> dict[str, Any]:
    """Inside a function: build and train every configuration, time their rounds (together
    at least ``measure_s`` of computation) and evaluation and the first one's checkpoint;
    report the peak resident memory of this invocation. In a group (see the module
    docstring) also the training time per sample with the whole group computing at once.
    In a fresh function, ``setup_s``: the seconds before its first round (the job's imports,
    the model built, the framework's first calls), which a run's fresh function pays too."""
    import numpy as np

    from faasml.runtime.function.worker import ModelRecipe, cached_dataset, cached_store
    from faasml.workloads import context

    reset = _reset_peak()
    store = cached_store(payload["object_url"])
    data, _ = cached_dataset(store, payload["train_key"])
    test, _ = cached_dataset(store, payload["test_key"])
    recipes: list[ModelRecipe] = payload["recipes"]
    group: dict[str, Any] | None = payload.get("group")
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    probe = _probe_loops if is_loop(recipes[0].model) else _probe_recipes
    timed = _timed_loops if probe is _probe_loops else _timed_rounds
    sampled = recipes[1:] if len(recipes) > 1 else recipes
    fresh, _SERVED[0] = _SERVED[0] == 0, _SERVED[0] + 1
    context.open_context()  # model code may call faasml.report while it trains, as in a worker
    try:
        if fresh:  # what a run's fresh function pays before its first round: part of its start
            began = time.perf_counter()
            timed(sampled[:1], data, rng, 0.0, 0)
            out["setup_s"] = time.perf_counter() - began
        if group is None:
            probe(recipes, data, test, store, payload, rng, out)
        else:
            prefix, index, size = str(group["prefix"]), int(group["index"]), int(group["size"])
            timed(sampled, data, rng, 0.0, 0)  # set up: models built, kernels warm
            store.put(f"{prefix}/ready/{index}", b"1")
            _wait(store, [f"{prefix}/ready/{i}" for i in range(size)])
            out["side_by_side_s_per_sample"] = timed(
                sampled, data, rng, float(payload["measure_s"]), int(payload["max_rounds"])
            )
            store.put(f"{prefix}/done/{index}", b"1")
            if index == 0:  # alone, once the others have returned
                _wait(store, [f"{prefix}/done/{i}" for i in range(1, size)])
                probe(recipes, data, test, store, payload, rng, out)
    finally:
        context.close_context()
    if "setup_s" in out:  # less its untimed rounds, which a run's epoch holds at the steady rate
        rate = out.get("side_by_side_s_per_sample", out.get("compute_s_per_sample", 0.0))
        rows = WARM_ROUNDS * min(sampled[0].batch_size, len(data))
        out["setup_s"] = max(0.0, out["setup_s"] - rows * float(rate))
    out["peak_rss_mb"] = _peak_rss_mb(reset)
    return out


def _probe_loops(
    recipes: list[Any],
    data: Any,
    test: Any,
    store: Any,
    payload: dict[str, Any],
    rng: Any,
    out: dict[str, Any],
) -> None:
    """``_probe_recipes`` for a training loop's configurations (``faasml.loop.probe``)."""
    from faasml.loop.probe import probe_loops

    rounds = (WARM_ROUNDS, PEAK_ROUNDS, int(payload["max_rounds"]))
    out.update(probe_loops(recipes, len(test), rounds, float(payload["measure_s"])))


def _timed_loops(
    recipes: list[Any], data: Any, rng: Any, measure_s: float, max_rounds: int
) -> float:
    """``_timed_rounds`` for a training loop's configurations."""
    from faasml.loop.probe import time_loop

    rounds = (WARM_ROUNDS, PEAK_ROUNDS if measure_s > 0 else 0, max_rounds)
    share = measure_s / len(recipes)
    timings = [time_loop(r.model_options, r.batch_size, r.seed, rounds, share) for r in recipes]
    return sum(t.compute_s_per_sample for t in timings) / len(timings)


def _wait(store: Any, keys: list[str]) -> None:
    """Until every key exists in ``store`` (the group's other functions got there)."""
    deadline = time.monotonic() + GROUP_WAIT_S
    pending = list(keys)
    while pending:
        pending = [k for k in pending if store.get(k) is None]
        if pending and time.monotonic() > deadline:
            raise RuntimeError(f"probe group: {pending[0]} did not appear in {GROUP_WAIT_S:g} s")
        if pending:
            time.sleep(0.02)


def train_round(
    model: Any,
    optimizer: Any,
    params: Any,
    data: Any,
    rng: Any,
    size: int,
    reduce: Callable[[Any], Any] | None = None,
) -> tuple[Any, float, float]:
    """One training round as a worker runs it: a random minibatch of ``size`` samples, the
    model's gradient, in a synchronised round ``reduce`` (the gradient to the mean the step
    applies), the optimiser's step. Returns (the new parameters, seconds of computation —
    minibatch, gradient and step —, seconds in ``reduce``)."""
    import numpy as np

    chosen = rng.integers(0, len(data), size=size)
    start = time.perf_counter()
    _, grad = model.loss_and_grad(params, data.features[chosen], data.labels[chosen])
    vector = np.asarray(grad, dtype=np.float32)
    synced = time.perf_counter()
    if reduce is not None:
        vector = reduce(vector)
    stepped = time.perf_counter()
    params = optimizer.step(params, vector)
    done = time.perf_counter()
    return params, (synced - start) + (done - stepped), stepped - synced


def warmed(recipe: Any, data: Any, rng: Any) -> tuple[Any, Any, Any, int]:
    """(model, optimiser, parameters, minibatch size) of ``recipe`` after WARM_ROUNDS untimed
    rounds (the first calls of a shape set up the framework's kernels)."""
    from faasml.runtime.function.worker import cached_model
    from faasml.workloads import create_optimizer

    model = cached_model(recipe)
    optimizer = create_optimizer(recipe.optimizer, model.num_params, **recipe.hyperparameters)
    params = model.init_params(recipe.seed)
    size = min(recipe.batch_size, len(data))
    for _ in range(WARM_ROUNDS):
        params, _, _ = train_round(model, optimizer, params, data, rng, size)
    return model, optimizer, params, size


def _timed_rounds(
    recipes: list[Any], data: Any, rng: Any, measure_s: float, max_rounds: int
) -> float:
    """Seconds of training per sample over ``recipes`` (each for its share of ``measure_s``
    after WARM_ROUNDS untimed rounds); with ``measure_s`` 0 only the untimed rounds."""
    per_sample = []
    share = measure_s / len(recipes)
    for recipe in recipes:
        model, optimizer, params, size = warmed(recipe, data, rng)
        spent, samples, rounds = 0.0, 0, 0
        if measure_s <= 0:
            continue
        began = time.perf_counter()
        while time.perf_counter() - began < share or rounds < PEAK_ROUNDS:
            params, seconds, _ = train_round(model, optimizer, params, data, rng, size)
            spent += seconds
            samples += size
            rounds += 1
            if max_rounds and rounds >= max_rounds:
                break
        per_sample.append(spent / max(samples, 1))
    return sum(per_sample) / len(per_sample) if per_sample else 0.0


def _probe_recipes(
    recipes: list[Any],
    data: Any,
    test: Any,
    store: Any,
    payload: dict[str, Any],
    rng: Any,
    out: dict[str, Any],
) -> None:
    from faasml.runtime.function.checkpoint import Checkpoint, load_checkpoint, save_checkpoint

    computes, evals = [], []
    share = float(payload["measure_s"]) / len(recipes)
    for index, recipe in enumerate(recipes):
        model, optimizer, params, size = warmed(recipe, data, rng)
        spent, samples, rounds = 0.0, 0, 0
        while rounds < PEAK_ROUNDS or spent < share:
            params, seconds, _ = train_round(model, optimizer, params, data, rng, size)
            spent += seconds
            samples += size
            rounds += 1
            if rounds >= int(payload["max_rounds"]) and rounds >= PEAK_ROUNDS:
                break
        computes.append(spent / max(samples, 1))
        start = time.perf_counter()
        if len(test):
            model.evaluate(params, test.features, test.labels)
        evals.append((time.perf_counter() - start) / max(len(test), 1))
        if index == 0:
            out["params"] = int(model.num_params)
            out["model_mb"] = float(model.size_mb)
            key = f"{payload['prefix']}/ckpt"
            timings: list[float] = []
            began = time.perf_counter()
            # Up to CHECKPOINT_TIMINGS times (a small model's in well under a second), the
            # median kept: one write that meets a busy disk would price every epoch too long.
            while len(timings) < CHECKPOINT_TIMINGS and (
                not timings or time.perf_counter() - began < CHECKPOINT_TIMING_S
            ):
                start = time.perf_counter()
                save_checkpoint(store, key, Checkpoint(params, optimizer.to_bytes(), 0, 0, 0))
                load_checkpoint(store, key)
                timings.append(time.perf_counter() - start)
            out["checkpoint_s"] = statistics.median(timings)
            store.delete(key)
    # Trials are sampled over the search space: price them at the mean of its configurations
    # (recipes after the first), the job's own configuration where there is no search.
    sampled = slice(1, None) if len(recipes) > 1 else slice(None)
    out["compute_s_per_sample"] = sum(computes[sampled]) / len(computes[sampled])
    out["config_compute_s"] = computes  # per configuration, as ``recipes`` (config_cost)
    out["config_eval_s"] = evals
    out["eval_s_per_sample"] = sum(evals[sampled]) / len(evals[sampled])
