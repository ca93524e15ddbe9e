"""Calls of the job probe (``job_probe.probe_job``) on a platform, shared by the job's first
measurement (``job_profile.measure_job``) and the re-check of a cached profile
(``profile_check``): the job's data put in a store the functions read, groups of functions
started together as a stage runs its trials, each invocation billed as 'profiling', and the
cold starts they paid."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faasml.catalog import Catalog
from faasml.job import JobSpec, apply_config
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.function.echo import ECHO_FN
from faasml.runtime.function.probe import PEAK_ROUNDS
from faasml.runtime.function.task import sent_recipe
from faasml.runtime.platforms.contract import Billed, FunctionError, Platform
from faasml.runtime.profile.preparing import PrepareHook, ProbeStep

PROBE_FN = "faasml.runtime.function.probe:probe_job"
MAX_GROUP = 4
"""Functions the probe runs side by side at most (enough to fill a small machine)."""


def job_recipes(job: JobSpec, configs: list[dict[str, Any]], train: Any) -> list[Any]:
    """The model recipe of each configuration (``{}``: the job's own) on ``train``'s shape."""
    from faasml.runtime.function.worker import ModelRecipe

    recipes = []
    for config in configs:
        variant = apply_config(job, config) if config else job
        recipes.append(
            ModelRecipe(
                model=variant.model.name,
                model_options=dict(variant.model.options),
                input_shape=tuple(train.input_shape),
                num_classes=train.num_classes,
                optimizer=variant.optimizer.name,
                hyperparameters=dict(variant.optimizer.hyperparameters),
                batch_size=variant.batch_size,
                seed=variant.seed,
            )
        )
    return recipes


def setup_s(result: Any) -> float:
    """The seconds a fresh probe function took before its first round (``setup_s`` of the
    probe's result; 0 where it has none): a run's fresh function pays them as part of its
    start, so the profile's cold start holds them."""
    if not isinstance(result, dict):
        return 0.0
    value = result.get("setup_s", 0.0)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


class ProbeCalls:
    """The probe's invocations of one measurement: ``payload`` (the job's data in an embedded
    store under ``folder``, its recipes, ``measure_s``), ``spent`` (USD billed as 'profiling'
    to ``meter``) and ``colds`` ((a start taken to one vCPU, vCPUs starting at once) each)."""

    def __init__(
        self,
        job: JobSpec,
        catalog: Catalog,
        platform: Platform,
        folder: str,
        recipes: list[Any],
        data: tuple[Any, Any],
        *,
        measure_s: float,
        meter: Meter | None = None,
        clock: Callable[[], float] | None = None,
        on_step: PrepareHook | None = None,
    ) -> None:
        """``on_step`` hears of each call as it starts and ends (``what`` names the step the
        measurement is at: its caller sets it)."""
        from faasml.sync.stores import open_store
        from faasml.workloads.data import dataset_to_bytes

        train, test = data
        self.catalog, self.platform = catalog, platform
        self.meter, self.clock = meter, clock
        self.spent = 0.0
        self.colds: list[tuple[float, float]] = []
        self.on_step, self.what, self.calls = on_step, "probe", 0
        self.began = time.monotonic()
        self.objects = open_store(f"embedded://{Path(folder).resolve() / 'objects'}")
        self.objects.put("probe/train", dataset_to_bytes(train))
        self.objects.put("probe/test", dataset_to_bytes(test))
        shipped: set[str] = set()
        recipes = [sent_recipe(recipe, self.objects, shipped) for recipe in recipes]
        self.payload: dict[str, Any] = {
            "object_url": self.objects.url,
            "train_key": "probe/train",
            "test_key": "probe/test",
            "recipes": recipes,
            "measure_s": measure_s,
            "max_rounds": max(PEAK_ROUNDS, math.ceil(len(train) / max(job.batch_size, 1))),
            "prefix": "probe",
        }

    def close(self) -> None:
        self.objects.close()

    def bill(self, billed: Billed) -> float:
        now = self.clock() if self.clock is not None else 0.0
        usd = (self.meter or Meter(self.catalog)).profiling(billed, now)
        self.spent += usd
        return usd

    def group(self, memory_mb: int) -> list[dict[str, Any]]:
        """Bodies of the functions started together at ``memory_mb``: where the platform's
        machine is bounded (the local platform), k that fill its vCPUs, as a stage runs its
        trials side by side; else one."""
        size = 1
        if self.catalog.platform.capacity_vcpus is not None:
            fill = int(self.catalog.platform.max_concurrent(memory_mb))
            size = int(min(MAX_GROUP, max(1, fill)))
        if size == 1:
            return [self.payload]
        return [
            {**self.payload, "group": {"prefix": "probe/group", "size": size, "index": i}}
            for i in range(size)
        ]

    def call(
        self, memory_mb: int, bodies: list[dict[str, Any]], fn: str = PROBE_FN
    ) -> list[dict[str, Any]]:
        """Run ``fn`` in ``len(bodies)`` functions of ``memory_mb`` started together; one
        failing stops the others (a group's functions wait for each other)."""
        spec = self.catalog.platform
        self._step(len(bodies), memory_mb, done=False)
        invocations = [self.platform.invoke(fn, body, memory_mb) for body in bodies]
        try:
            while not all(i.done() for i in invocations):
                if any(i.billed is not None and not i.billed.ok for i in invocations):
                    break
                time.sleep(0.01)
            limit = spec.max_duration_s + 60
            for failed in [i for i in invocations if i.billed is not None and not i.billed.ok]:
                failed.result(timeout=limit)  # raises its FunctionError; the rest stop
            return [i.result(timeout=limit) for i in invocations]
        finally:
            for invocation in invocations:
                if not invocation.done():
                    invocation.cancel()
                result: Any = None
                with contextlib.suppress(Exception):  # its bill is what is wanted here
                    result = invocation.result(timeout=60)
                billed = invocation.billed
                if billed is None:
                    continue
                self.bill(billed)
                if billed.cold and billed.init_s > 0:
                    share = 1.0
                    if spec.cold_start_scales_with_cpu:
                        share = min(1.0, float(spec.vcpus(memory_mb)))
                    demand = float(spec.vcpus(memory_mb)) * len(bodies)
                    self.colds.append(((billed.init_s + setup_s(result)) * share, demand))
            self._step(len(bodies), memory_mb, done=True)

    def _step(self, functions: int, memory_mb: int, *, done: bool) -> None:
        """Tell ``on_step`` of a call starting (a new step) or ending."""
        if self.on_step is None:
            return
        self.calls += 0 if done else 1
        elapsed = time.monotonic() - self.began
        self.on_step(
            ProbeStep(self.calls, self.what, functions, memory_mb, done, elapsed, self.spent)
        )

    def round_trips(self, memory_mb: int, count: int = 3) -> list[float]:
        """Seconds of ``count`` invocations doing nothing (warm where a function is idle)."""
        seconds = []
        self._step(1, memory_mb, done=False)
        for _ in range(count):
            start = time.monotonic()
            invocation = self.platform.invoke(ECHO_FN, 0, memory_mb)
            invocation.result(timeout=60)
            seconds.append(time.monotonic() - start)
            if invocation.billed is not None:
                self.bill(invocation.billed)
        self._step(1, memory_mb, done=True)
        return seconds


__all__ = ["MAX_GROUP", "PROBE_FN", "FunctionError", "ProbeCalls", "job_recipes", "setup_s"]
