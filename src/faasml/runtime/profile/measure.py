"""Measured job profiles: the planner's inputs taken from the job in the file, not a paper.

Before a real run is planned, ``measure_job`` probes the job on its platform, as billed
functions (``runtime.job_probe``): at one vCPU's worth of memory, every model configuration
the search space can build is trained a few rounds and the peak resident memory (runtime and
framework included) is the footprint; at the least memory that holds it plus
``MEMORY_MARGIN``, compute and evaluation per sample, checkpoint time and the cold start; two
functions synchronising the job's real gradient through its store (``runtime.sync_probe``).
``planning_inputs`` turns a profile into the ``Workload`` (u(m) as a measured table, the
footprint as ``runtime_mb``) and ``Catalog`` (measured cold start and per-invocation latency)
the planners read. Profiles are cached by a key of everything that changes them
(``runtime.profile_key``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import FaasmlError
from faasml.job import JobSpec
from faasml.loop import is_loop
from faasml.models.config_cost import ConfigCosts, relative_costs
from faasml.models.contention import (
    cold_start_alone,
    delivered_vcpus,
    faster_solo,
    solo_disturbed,
)
from faasml.runtime.coordinator import WORKER_MODULE
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.platforms.contract import FunctionError, Platform
from faasml.runtime.profile.cache import cache_dir, cached_profile, epochs_checked, store_profile
from faasml.runtime.profile.calls import MAX_GROUP, ProbeCalls, job_recipes
from faasml.runtime.profile.check import (
    RECHECK_MEASURE_S,
    checked_profile,
    load_average,
    rechecks,
)
from faasml.runtime.profile.key import profile_key
from faasml.runtime.profile.preparing import PrepareHook
from faasml.runtime.profile.record import MEMORY_MARGIN, JobProfile
from faasml.runtime.profile.sync_round import measured_sync, priced_storages
from faasml.workloads.build import load_data

__all__ = [
    "MAX_GROUP",
    "MEMORY_MARGIN",
    "JobProfile",
    "ProfilingError",
    "cache_dir",
    "cached_profile",
    "epochs_checked",
    "fitting_memory_mb",
    "measure_job",
    "model_configs",
    "planning_inputs",
    "platform_options_for",
    "profile_key",
    "roomy_memory_mb",
]
from faasml.workload import ComputeProfile, Workload

MEASURE_S = 0.6
"""Seconds of computation each compute measurement covers at least (six CPU-quota periods)."""
MAX_CONFIGS = 8
"""Model configurations measured at most (the largest are kept)."""


class ProfilingError(FaasmlError):
    """The job could not be measured (it fails, or fits no function)."""


def model_configs(job: JobSpec) -> list[dict[str, Any]]:
    """The job's own model configuration first, then the search space's ``model.*`` (and
    ``batch_size``) extremes: every configuration whose footprint could be the largest."""
    space = job.search_space
    keys = [] if space is None else [k for k in space.params if k.startswith("model.")]
    if space is not None and "batch_size" in space.params:
        keys.append("batch_size")
    if not keys or space is None:
        return [{}]
    choices = [_distinct(space.params[k].extremes()) for k in keys]
    combos = [dict(zip(keys, values, strict=True)) for values in itertools.product(*choices)]
    if len(combos) > MAX_CONFIGS:  # keep the largest: every key at its greatest extreme
        combos = sorted(combos, key=_size_rank, reverse=True)[:MAX_CONFIGS]
    return [{}, *combos]


def _distinct(values: tuple[Any, ...]) -> list[Any]:
    """``values`` without repeats, in a stable order (lists allowed: compared by repr)."""
    return list({repr(v): v for v in sorted(values, key=repr)}.values())


def _size_rank(config: Mapping[str, Any]) -> tuple[float, ...]:
    return tuple(float(v) if isinstance(v, int | float) else 0.0 for v in config.values())


def fitting_memory_mb(floor_mb: float, catalog: Catalog) -> int:
    """The least memory size of the catalog's grid at or above ``floor_mb``."""
    return _round_up(floor_mb, catalog)


def _round_up(memory_mb: float, catalog: Catalog) -> int:
    platform = catalog.platform
    step = platform.memory_step_mb
    size = max(platform.memory_min_mb, math.ceil(memory_mb / step) * step)
    return int(size)


def roomy_memory_mb(catalog: Catalog, *, largest: bool = False) -> int:
    """Where the footprint is measured: one vCPU's worth of memory (the most where a job
    needs more, ``largest``), within what the platform gives."""
    platform = catalog.platform
    step = platform.memory_step_mb
    cap = platform.memory_max_mb if largest else platform.mb_per_vcpu
    size = min(platform.memory_max_mb, math.floor(cap / step) * step)
    return int(max(size, platform.memory_min_mb))


def _probe_calls(
    job: JobSpec,
    catalog: Catalog,
    platform: Platform,
    folder: str,
    measure_s: float,
    meter: Meter | None,
    clock: Callable[[], float] | None,
    on_step: PrepareHook | None = None,
) -> tuple[ProbeCalls, tuple[Any, Any], list[Any]]:
    """The job's probe as a measurement and a re-check both run it: the data loaded, every
    model configuration built; (calls, (train, test), recipes)."""
    train, test = load_data(job.dataset)
    recipes = job_recipes(job, model_configs(job), train)
    calls = ProbeCalls(
        job, catalog, platform, folder, recipes, (train, test), measure_s=measure_s, meter=meter,
        clock=clock, on_step=on_step,
    )  # fmt: skip
    return calls, (train, test), recipes


def measure_job(
    job: JobSpec,
    catalog: Catalog,
    platform: Platform,
    *,
    meter: Meter | None = None,
    platform_options: Mapping[str, Any] | None = None,
    refresh: bool = False,
    recheck: bool | None = None,
    clock: Callable[[], float] | None = None,
    on_step: PrepareHook | None = None,
    before_probe: Callable[[], None] | None = None,
) -> JobProfile:
    """The job's profile: from the cache, else measured on ``platform`` (billed to ``meter``
    as 'profiling' charges when given). A cached profile is used as it is (the run's own
    epochs check it: ``epochs_checked``) unless a re-check is asked for
    (``recheck``, ``profile_check.rechecks``): it then comes back kept, rescaled or measured
    again, with its ``check``. ``before_probe`` is called before a measurement starts (a
    run's deadline check: it may raise before anything is paid); ``on_step`` hears of each
    of the probe's calls as it starts and ends (``preparing.ProbeStep``)."""
    key = profile_key(job, catalog, platform_options or {})
    check = None
    if not refresh:
        found = cached_profile(key)
        if found is not None:
            if not rechecks(recheck):
                return found
            found = _recheck(found, job, catalog, platform, meter, clock, on_step)
            check = found.check
            if check is None or check.action != "re-profiled":
                if check is not None and check.action == "rescaled":
                    store_profile(found)
                return found
    if before_probe is not None and check is None:
        before_probe()
    profile = _probed_profile(job, catalog, platform, key, meter, clock, on_step)
    store_profile(profile)
    return dataclasses.replace(profile, check=check)


def _probed_profile(
    job: JobSpec,
    catalog: Catalog,
    platform: Platform,
    key: str,
    meter: Meter | None,
    clock: Callable[[], float] | None,
    on_step: PrepareHook | None = None,
) -> JobProfile:
    """The job measured afresh on ``platform`` (not cached here): footprint, compute,
    evaluation and checkpoint per size, cold start, dispatch and synchronisation."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="faasml-probe-") as folder:
        calls, (train, test), recipes = _probe_calls(
            job, catalog, platform, folder, MEASURE_S, meter, clock, on_step
        )
        payload = calls.payload
        roomy, results, retimed = _timed_roomy(job, catalog, calls)
        first = results[0]
        # Two functions synchronising, while the group's are still warm.
        calls.what = "synchronised round"
        sync, notes = measured_sync(job, catalog, calls.call, roomy, payload, first)
        notes = (*notes, retimed) if retimed else notes
        delivered, ratio = delivered_vcpus(results, float(catalog.platform.vcpus(roomy)), catalog)
        points, fit, footprint = _sized_points(job, catalog, calls, roomy, first)
        calls.what = "warm round trips"
        warm = calls.round_trips(fit)
        calls.close()
    ordered = sorted(points.items())
    return JobProfile(
        config_costs=_config_costs(job, first, train, test),
        key=key,
        params=int(first["params"]),
        model_mb=float(first["model_mb"]),
        bytes_per_sample=train.size_mb * 1e6 / max(len(train), 1),
        footprint_mb=footprint,
        compute_points=tuple((m, float(p["compute_s_per_sample"])) for m, p in ordered),
        eval_points=tuple((m, float(p["eval_s_per_sample"])) for m, p in ordered),
        checkpoint_s=statistics.median(float(p["checkpoint_s"]) for _, p in ordered),
        cold_start_s=cold_start_alone(calls.colds, delivered, catalog),
        dispatch_s=statistics.median(warm),
        train_samples=len(train),
        test_samples=len(test),
        configs=len(recipes),
        delivered_vcpus=delivered,
        side_by_side_ratio=ratio,
        sync_storage=sync.storage,
        sync_memory_mb=roomy if sync.rounds else 0,
        sync_rounds=sync.rounds,
        straggler_share=sync.straggler_share,
        notes=notes,
        profiling_usd=calls.spent,
        profiling_s=time.monotonic() - began,
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        load_avg=load_average(),
    )


def _timed_roomy(
    job: JobSpec, catalog: Catalog, calls: ProbeCalls
) -> tuple[int, list[dict[str, Any]], str]:
    """The probe at one vCPU's worth of memory (the most where it runs out there): its size,
    the group's results, and a note where the one timed alone was timed again."""
    payload = calls.payload
    roomy = roomy_memory_mb(catalog)
    # Side by side at one vCPU's worth, as a stage runs its trials, where the platform's
    # machine is bounded (the local platform): k functions that fill its vCPUs.
    calls.what = "footprint and compute"
    try:
        try:
            results = calls.call(roomy, calls.group(roomy))
        except FunctionError as err:
            if err.kind != "out-of-memory" or roomy >= roomy_memory_mb(catalog, largest=True):
                raise
            roomy = roomy_memory_mb(catalog, largest=True)
            results = calls.call(roomy, [payload])
    except FunctionError as err:
        fits = "; it fits no function of " + catalog.name if err.kind == "out-of-memory" else ""
        raise ProfilingError(
            f"job {job.name} could not be measured in a {roomy} MB function "
            f"({err.kind}: {err}){fits}"
        ) from None
    retimed = ""
    if solo_disturbed(results):  # timed alone slower than side by side: time it again
        before = float(results[0]["compute_s_per_sample"])
        calls.what = "compute alone, timed again"
        results[0] = faster_solo(results[0], calls.call(roomy, [payload])[0])
        after = float(results[0]["compute_s_per_sample"])
        retimed = (
            f"the function timed alone ran slower than the group side by side: timed "
            f"again, {before * 1e3:.3g} -> {after * 1e3:.3g} ms per sample kept"
        )
    return roomy, results, retimed


def _sized_points(
    job: JobSpec, catalog: Catalog, calls: ProbeCalls, roomy: int, first: dict[str, Any]
) -> tuple[dict[int, dict[str, Any]], int, float]:
    """The probe's results by memory size (the roomy one, the least that fits the footprint,
    one vCPU's worth between), the size that fits, and the footprint."""
    platform_spec, payload = catalog.platform, calls.payload
    footprint = float(first["peak_rss_mb"])
    fit = _round_up(footprint * (1.0 + MEMORY_MARGIN), catalog)
    if fit > platform_spec.memory_max_mb:
        raise ProfilingError(
            f"job {job.name} needs {footprint:.0f} MB (+{MEMORY_MARGIN:.0%}) per function, "
            f"more than the {platform_spec.memory_max_mb} MB {catalog.name} allows"
        )
    points = {roomy: first}
    one_vcpu = roomy_memory_mb(catalog)
    sizes = [fit] + ([one_vcpu] if fit < one_vcpu < roomy else [])
    for size in sizes:
        if size in points:
            continue
        calls.what = "compute per sample"
        try:
            points[size] = calls.call(size, [payload])[0]
        except FunctionError as err:
            if err.kind != "out-of-memory":
                raise ProfilingError(f"the probe of job {job.name} failed: {err}") from None
            # The base configuration needed more here than the roomy run suggested.
            footprint = max(footprint, size / (1.0 + MEMORY_MARGIN) + 1)
    return points, fit, footprint


def _config_costs(job: JobSpec, result: Mapping[str, Any], train: Any, test: Any) -> ConfigCosts:
    """Each sampled configuration's training and evaluation seconds per training sample (the
    mix ``planning_inputs`` prices) over their mean, from one probe function's timings."""
    configs = model_configs(job)
    computes = list(result.get("config_compute_s", ()))
    evals = list(result.get("config_eval_s", ()))
    if len(configs) < 2 or len(computes) != len(configs) or len(evals) != len(configs):
        return ()
    ratio = len(test) / max(len(train), 1)
    seconds = [c + e * ratio for c, e in zip(computes, evals, strict=True)]
    return relative_costs(configs[1:], seconds[1:])  # the first is the job's own


def _recheck(
    profile: JobProfile,
    job: JobSpec,
    catalog: Catalog,
    platform: Platform,
    meter: Meter | None,
    clock: Callable[[], float] | None,
    on_step: PrepareHook | None = None,
) -> JobProfile:
    """``profile`` re-checked by a short run of the job's probe at one memory size it measured
    (one vCPU's worth, where it ran a group side by side, as it did; billed as 'profiling'):
    kept, rescaled or marked to be measured again (``profile_check.checked_profile``)."""
    began = time.monotonic()
    load_now = load_average()
    sizes = [m for m, _ in profile.compute_points]
    memory = roomy_memory_mb(catalog)
    if memory not in sizes:
        memory = max(sizes)
    with tempfile.TemporaryDirectory(prefix="faasml-recheck-") as folder:
        calls, _, _ = _probe_calls(
            job, catalog, platform, folder, RECHECK_MEASURE_S, meter, clock, on_step
        )
        calls.what = "re-check of the cached profile"
        group = profile.side_by_side_ratio > 0 and memory == roomy_memory_mb(catalog)
        try:
            results = calls.call(memory, calls.group(memory) if group else [calls.payload])
        except FunctionError as err:
            raise ProfilingError(
                f"the re-check of job {job.name}'s cached profile failed in a {memory} MB "
                f"function ({err.kind}: {err}); measure it again with --reprofile"
            ) from None
        finally:
            calls.close()
    return checked_profile(
        profile,
        memory,
        results,
        calls.colds,
        catalog,
        usd=calls.spent,
        seconds=time.monotonic() - began,
        load_now=load_now,
    )


def planning_inputs(
    profile: JobProfile,
    workload: Workload,
    catalog: Catalog,
    coordinator_s: float = 0.0,
    compute_factor: float = 1.0,
) -> tuple[Workload, Catalog]:
    """The workload and catalog the planners read for this job, from its measured profile.

    u(m) (seconds per MB of training data) = (training seconds per sample + evaluation
    seconds per test sample × test/train samples) / MB per sample at each measured memory;
    runtime_mb = footprint × (1 + margin) − the training data − the model copies, so that
    ``memory_needed_mb(1)`` is the measured footprint with its margin (the data term shrinks
    as D/n with more functions). The catalog's cold start is the measured one; its
    per-invocation latency the warm round trip plus a checkpoint's save and load (a warm
    function keeps its partition: it is read once, at the start); on a bounded
    platform, the vCPUs its machine delivered to the probe's functions side by side; the
    job's store, each scheme's latency fitted to the synchronised round the probe measured
    (``sync_probe.priced_storages``), and the straggler wait as the workload's share of a
    round's computation; ``coordinator_s``, the run's coordinator's seconds between a trial's
    invocations (in the time, not billed: ``estimates.coordinator_seconds``);
    ``compute_factor``, the run's trials' training cost over the search space's mean
    (``config_cost.mean_factor``), scaling u(m).
    """
    mb_per_sample = max(profile.bytes_per_sample / 1e6, 1e-12)
    ratio = profile.test_samples / max(profile.train_samples, 1)
    evals = dict(profile.eval_points)
    delivered = catalog.platform.delivered_vcpus
    if profile.delivered_vcpus > 0:
        delivered = profile.delivered_vcpus
    platform = dataclasses.replace(
        catalog.platform,
        cold_start_s=profile.cold_start_s,
        warm_start_s=profile.dispatch_s + profile.checkpoint_s,
        delivered_vcpus=delivered,
        coordinator_s=coordinator_s,
        keeps_partition=True,  # faasml's workers keep their partition while warm
    )
    storages = priced_storages(
        catalog.storages,
        platform,
        profile.sync_storage,
        profile.sync_memory_mb,
        profile.sync_rounds,
        max(profile.model_mb, 1e-6),
    )
    # Each point was measured by one function alone: taken back to a machine it did not
    # share with the job's other functions (the estimates add what k at once share).
    points = tuple(
        (
            float(m),
            max(
                (s + evals.get(m, 0.0) * ratio)
                * compute_factor
                / mb_per_sample
                / platform.contention(float(platform.vcpus(m))),
                1e-12,
            ),
        )
        for m, s in profile.compute_points
    )
    # What of a function's u(m) is the epoch's evaluation (worker 0 alone, at every n).
    shares = [
        evals.get(m, 0.0) * ratio / (s + evals.get(m, 0.0) * ratio)
        for m, s in profile.compute_points
        if s + evals.get(m, 0.0) * ratio > 0
    ]
    dataset_mb = workload.dataset_mb
    copies_mb = workload.model_copies * profile.model_mb
    runtime = max(profile.memory_floor_mb() - dataset_mb - copies_mb, 0.0)
    measured = dataclasses.replace(
        workload,
        compute=ComputeProfile("table", points=points),
        model_mb=max(profile.model_mb, 1e-6),
        runtime_mb=runtime,
        straggler_share=profile.straggler_share,
        evaluation_share=sum(shares) / len(shares) if shares else 0.0,
    )
    return measured, dataclasses.replace(catalog, platform=platform, storages=storages)


def platform_options_for(job: JobSpec, model: object, options: Mapping[str, Any]) -> dict[str, Any]:
    """The platform options a run of ``job`` uses: on ``local``, ``ray`` and ``lithops``, its
    functions import the worker's module as they start (``WORKER_MODULE``: as a Lambda's init
    phase runs the handler module's imports, paid in the cold start the probe measures, not in
    the first invocation), and a PyTorch model's functions import torch too (a deployment
    package's import, outside the address-space cap, counted in resident memory as on a real
    function); a training loop's functions import ``torch._dynamo`` too, which its first
    ``torch.optim`` optimiser would import in its first invocation."""
    out = dict(options)
    if job.platform in ("local", "ray", "lithops") and "preload" not in out:
        from faasml.workloads.torch_model import TorchModel

        loop = is_loop(job.model.name)
        torch = ("torch",) if isinstance(model, TorchModel) or loop else ()
        # A loop's first torch.optim optimiser imports torch._dynamo (seconds): in the start.
        dynamo = ("torch._dynamo",) if loop else ()
        out["preload"] = (*torch, *dynamo, WORKER_MODULE)
    return out
