"""Calibration (MISSION C2): run a few iterations of the real job and fit the model's inputs.

``profile_job`` runs the job's own model and data on the platform at a few memory sizes and
function counts and measures: u(m), seconds of computation per MB of training data at each
memory size (the ``table`` form of ``ComputeProfile``); for every store the job may
synchronise through (``JobSpec.sync_stores``), its bandwidth b and raw latency from inside a
function and the synchronisation time per round of each of its schemes at each function count,
from which eq. 3 is solved for the effective latency per transfer ℓ (what the catalog gets:
a transfer in a real round also waits for polling and for CPU share); and the platform's cold
and warm start. The result is written as a workload profile and a catalog the planners read,
so that they choose the store per allocation from measured figures and the catalog's prices
(CE-scaling Finding 3: the cheapest-fastest store depends on the model and the worker count).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from faasml.catalog import DATA_DIR, Catalog, load_catalog
from faasml.job import JobSpec
from faasml.models.sync import item_mb, transfers
from faasml.runtime.coordinator import WORKER_FN, Coordinator
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.function.echo import ECHO_FN
from faasml.runtime.function.task import sent_recipe
from faasml.runtime.function.worker import ModelRecipe, SegmentReport, WorkerTask
from faasml.runtime.platforms.contract import Platform, open_platform
from faasml.sync.stores import Store, open_store
from faasml.workloads.build import build_model, load_data
from faasml.workloads.global_batch import rounds_per_epoch

PROBE_FN = "faasml.runtime.profile.calibrate:probe_store"
MEASURE_S = 1.0
"""Computation each u(m) measurement covers at least (ten 100 ms CPU-quota periods)."""


def probe_store(payload: dict[str, Any]) -> dict[str, float]:
    """Inside a function: median latency of small GETs and bandwidth of large PUT+GETs."""
    store = open_store(payload["url"])
    key = payload["prefix"]
    small = b"x" * 8
    store.put(f"{key}/small", small)
    latencies = []
    for _ in range(int(payload.get("small_repeats", 40))):
        start = time.perf_counter()
        store.get(f"{key}/small")
        latencies.append(time.perf_counter() - start)
    latency = statistics.median(latencies)
    size_mb = float(payload.get("large_mb", 4.0))
    large = bytes(int(size_mb * 1e6))
    rates = []
    for index in range(int(payload.get("large_repeats", 4))):
        start = time.perf_counter()
        store.put(f"{key}/large-{index}", large)
        store.get(f"{key}/large-{index}")
        elapsed = time.perf_counter() - start - 2 * latency
        rates.append(2 * size_mb / max(elapsed, 1e-6))
    store.delete(f"{key}/")
    return {"latency_s": latency, "bandwidth_mbps": statistics.median(rates)}


@dataclass
class StoreProfile:
    """What a profiling run measured of one store."""

    latency_s: float = 0.0
    """Median latency of a small GET from inside a function."""
    bandwidth_mbps: float = 0.0
    """Median MB/s of large PUT + GET pairs from inside a function."""
    sync_s_per_round: dict[str, float] = field(default_factory=dict)
    """'n=2 allreduce' -> measured seconds per synchronisation round."""
    sync_latency_s: float = 0.0
    """Effective latency per transfer fitted from the sync rounds (eq. 3 solved for ℓ): what
    a transfer costs in a real round, polling and CPU-share waits included."""
    scheme_latency_s: dict[str, float] = field(default_factory=dict)
    """The same fitted per scheme (schemes poll and overlap their transfers differently)."""


@dataclass
class ProfileResult:
    """What a profiling run measured."""

    compute_points: list[tuple[int, float]] = field(default_factory=list)
    """(memory MB, seconds per MB of training data): u(m)."""
    stores: dict[str, StoreProfile] = field(default_factory=dict)
    """Catalog storage name -> what was measured of that store."""
    cold_start_s: float = 0.0
    warm_start_s: float = 0.0
    rounds: int = 0
    invocation_overhead_s: float = 0.0
    """Seconds a warm invocation spends besides its rounds: dispatch, checkpoint load and
    save, evaluation. Written as the catalog's warm_start_s (the model's per-invocation
    latency)."""


def profile_job(
    job: JobSpec,
    *,
    memories: tuple[int, ...] = (256, 512, 1024, 1769),
    counts: tuple[int, ...] = (2,),
    rounds: int = 8,
    catalog: Catalog | None = None,
    work_dir: str | Path,
    platform_options: dict[str, Any] | None = None,
) -> ProfileResult:
    """Measure u(m), every store of the job and the platform by running ``rounds`` rounds of
    the job."""
    from faasml.runtime.runs.session import stores_catalog  # not in the probe's function: scipy

    catalog = stores_catalog(catalog or load_catalog(job.catalog), job.sync_stores())
    train, test = load_data(job.dataset)
    folder = Path(work_dir)
    objects = open_store(f"embedded://{folder.resolve() / 'objects'}")
    made = ModelRecipe(
        job.model.name,
        dict(job.model.options),
        tuple(train.input_shape),
        train.num_classes,
        job.optimizer.name,
        dict(job.optimizer.hyperparameters),
        job.batch_size,
        job.seed,
    )
    recipe = sent_recipe(made, objects, set())  # a training function by reference
    result = ProfileResult(rounds=rounds)
    mb_per_sample = train.size_mb / len(train)
    low, high = catalog.platform.memory_min_mb, catalog.platform.memory_max_mb
    sizes = sorted({min(max(m, low), high) for m in memories})
    with contextlib.ExitStack() as cleanup:
        urls = _store_urls(job, folder, cleanup)
        platform = cleanup.enter_context(
            open_platform(job.platform, catalog, **(platform_options or {}))
        )
        sync_url = next(iter(urls.values()))
        coordinator = Coordinator(
            platform, catalog, Meter(catalog), objects, sync_url, lambda _: recipe, namespace="p"
        )
        coordinator.set_data(train, test)
        # This run's own prefix in the stores: a store shared with other runs (or an earlier
        # profile) may hold keys of the same rounds, which a scheme would read as this run's.
        keys = f"p-{uuid.uuid4().hex[:8]}"
        prober = _Prober(catalog, platform, coordinator, objects, recipe, keys, rounds, sync_url)
        epoch_rounds = rounds_per_epoch(len(train), job.batch_size)
        for memory in sizes:
            result.compute_points.append(prober.compute_point(memory, epoch_rounds, mb_per_sample))
        warms: list[float] = []
        for _ in range(5):
            start = time.monotonic()
            platform.invoke(ECHO_FN, 0, sizes[0]).result(timeout=60)
            warms.append(time.monotonic() - start)
        model_mb = build_model(job.model, train.input_shape, train.num_classes).size_mb
        for name, url in urls.items():
            limits = tuple((n, epoch_rounds) for n in counts)
            result.stores[name] = prober.measure_store(name, url, limits, sizes[0], model_mb)
        colds, fixed = prober.colds, prober.fixed
        result.cold_start_s = statistics.median(colds) if colds else 0.0
        result.warm_start_s = statistics.median(warms)
        result.invocation_overhead_s = statistics.median(fixed) if fixed else result.warm_start_s
        coordinator.close()
    objects.close()
    return result


@dataclass
class _Prober:
    """A profiling run's open platform, coordinator and stores, and what its segments measured
    besides their rounds (cold starts, per-invocation overheads)."""

    catalog: Catalog
    platform: Platform
    coordinator: Coordinator
    objects: Store
    recipe: ModelRecipe
    keys: str
    """This run's own key prefix in the stores."""
    rounds: int
    sync_url: str
    """The store a segment synchronises through unless told another."""
    colds: list[float] = field(default_factory=list)
    overheads: list[float] = field(default_factory=list)
    fixed: list[float] = field(default_factory=list)
    """The overheads of the u(m) segments (the catalog's per-invocation latency)."""

    def segment(
        self,
        n: int,
        memory: int,
        scheme: str,
        tag: str,
        start: str | None = None,
        count: int | None = None,
        sync_url: str | None = None,
    ) -> list[SegmentReport]:
        """Run ``count`` rounds (``rounds``) in ``n`` functions of ``memory``; their reports."""
        catalog, platform, objects = self.catalog, self.platform, self.objects
        sync_url = self.sync_url if sync_url is None else sync_url
        self.coordinator.prepare_partitions(n)
        tasks = [
            WorkerTask(
                recipe=self.recipe,
                object_url=objects.url,
                sync_url=sync_url,
                scheme=scheme,
                namespace=f"{self.keys}/{tag}",
                data_prefix=self.coordinator.data_prefix,
                n=n,
                worker_id=w,
                epoch=0,
                start_batch=0,
                stop_batch=self.rounds if count is None else count,
                round_id=0,
                checkpoint=start,
                checkpoint_out=f"p/ckpt-{tag}",
            )
            for w in range(n)
        ]
        began = time.monotonic()
        calls = [platform.invoke(WORKER_FN, task, memory) for task in tasks]
        reports: list[SegmentReport] = [call.result(timeout=600) for call in calls]
        wall = time.monotonic() - began
        busy = max(r.compute_s + r.sync_s for r in reports)
        self.overheads.append(max(wall - busy, 0.0))
        for call in calls:
            if call.billed is not None and call.billed.cold:
                # Catalogs state the cold start at one vCPU; where a start runs under the
                # CPU share, a start measured at a smaller share is scaled back to it.
                share = 1.0
                if catalog.platform.cold_start_scales_with_cpu:
                    share = min(1.0, float(catalog.platform.vcpus(memory)))
                self.colds.append(call.billed.init_s * share)
        objects.delete(f"{self.keys}/{tag}/")
        with open_store(sync_url) as sync:  # the last round's keys stay otherwise
            sync.delete(f"{self.keys}/{tag}/")
        return reports

    def compute_point(
        self, memory: int, epoch_rounds: int, mb_per_sample: float
    ) -> tuple[int, float]:
        """u(m) at ``memory``: (memory MB, seconds of computation per MB of training data)."""
        # The first run starts the function and loads the data; the second runs long
        # enough (MEASURE_S of computation) to span many CPU-quota periods.
        warm = self.segment(1, memory, "allreduce", f"warm-{memory}")[0]
        per_round = warm.compute_s / max(warm.rounds, 1)
        count = min(epoch_rounds, max(self.rounds, math.ceil(MEASURE_S / max(per_round, 1e-6))))
        self.overheads.clear()
        report = self.segment(
            1, memory, "allreduce", f"u-{memory}", f"p/ckpt-warm-{memory}", count
        )[0]
        self.fixed.extend(self.overheads)
        return memory, report.compute_s / max(report.samples * mb_per_sample, 1e-12)

    def measure_store(
        self, name: str, url: str, limits: tuple[tuple[int, int], ...], memory: int, model_mb: float
    ) -> StoreProfile:
        """The store ``name`` at ``url``: its latency and bandwidth from inside a function, and
        each scheme's rounds at each function count of ``limits`` ((n, rounds of an epoch)),
        with the latency per transfer fitted from them (eq. 3 solved for ℓ)."""
        probe = self.platform.invoke(PROBE_FN, {"url": url, "prefix": f"{self.keys}/probe"}, memory)
        measured = probe.result(timeout=600)
        store = StoreProfile(measured["latency_s"], measured["bandwidth_mbps"])
        fitted: dict[str, list[float]] = {}
        for n, limit in limits:
            for scheme in self.catalog.storage(name).schemes:
                tag = f"{name}-{n}-{scheme}"
                warm_up = self.segment(n, memory, scheme, f"w-{tag}", sync_url=url)
                busy = max(r.compute_s + r.sync_s for r in warm_up) / max(warm_up[0].rounds, 1)
                count = min(limit, max(self.rounds, math.ceil(MEASURE_S / max(busy, 1e-6))))
                reports = self.segment(n, memory, scheme, f"s-{tag}", None, count, url)
                per_round = max(r.sync_s for r in reports) / max(reports[0].rounds, 1)
                store.sync_s_per_round[f"n={n} {scheme}"] = per_round
                steps = float(transfers(scheme, n))
                item = float(item_mb(scheme, n, model_mb))
                ell = max(per_round / steps - item / store.bandwidth_mbps, 0.0)
                fitted.setdefault(scheme, []).append(ell)
        every = [ell for values in fitted.values() for ell in values]
        store.sync_latency_s = statistics.median(every) if every else store.latency_s
        store.scheme_latency_s = {s: statistics.median(v) for s, v in fitted.items()}
        return store


def _store_urls(job: JobSpec, folder: Path, cleanup: contextlib.ExitStack) -> dict[str, str]:
    """URL of every store the job may synchronise through, the job's ``store`` first; the
    ones faasml provides are made here (a directory; a parameter server or an InfiniCache
    deployment, stopped after)."""
    urls: dict[str, str] = {}
    for name, url in job.sync_stores().items():
        if url is None and name == "vm-ps":
            from faasml.sync.param_server import ParameterServer

            server = ParameterServer().start()
            cleanup.callback(server.stop)
            url = server.url
        elif url is not None and url.startswith("infinicache:"):
            from faasml.sync.stores.infinicache.runs import starts_deployment

            if starts_deployment(url):  # measured through a deployment started here
                from faasml.runtime.platforms.infinicache import start_infinicache

                cache = start_infinicache(url)
                cleanup.callback(cache.close)
                url = cache.url
        elif url is None:
            url = f"embedded://{folder.resolve() / 'sync'}"
        urls[name] = url
    return urls


def write_profile(
    job: JobSpec, result: ProfileResult, out_dir: str | Path, catalog: Catalog | None = None
) -> tuple[Path, Path]:
    """Write ``workload.yaml`` (u(m) as a table) and ``catalog.yaml`` (the job's catalog with
    the measured store latency and bandwidth and cold / warm starts); returns their paths."""
    from faasml.runtime.runs.session import job_workload  # not in the probe's function: scipy

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    train, _ = load_data(job.dataset)
    model = build_model(job.model, train.input_shape, train.num_classes)
    workload = job_workload(job, train, model)
    points = sorted(result.compute_points)
    profile = {
        "format": 1,
        "name": f"{job.name}-profiled",
        "description": f"{job.name} as measured by faasml profile",
        "model": job.model.name,
        "dataset": {"name": job.name, "size_mb": workload.dataset_mb, "samples": workload.samples},
        "model_size_mb": max(workload.model_mb, 1e-9),
        "batch_size": job.batch_size,
        "epochs": job.training.max_epochs,
        "memory": {"runtime_mb": workload.runtime_mb, "model_copies": workload.model_copies},
        "compute": {
            "model": "table",
            "points": [[float(m), float(u)] for m, u in points],
            "derivation": f"faasml profile: {result.rounds} rounds per memory size",
        },
        "notes": "measured synchronisation per round: "
        + "; ".join(
            f"{name} {key}: {value:.6f} s"
            for name, store in sorted(result.stores.items())
            for key, value in sorted(store.sync_s_per_round.items())
        ),
    }
    workload_path = folder / "workload.yaml"
    workload_path.write_text(yaml.safe_dump(profile, sort_keys=False))
    source = Path(job.catalog) if Path(job.catalog).exists() else DATA_DIR / f"{job.catalog}.yaml"
    data = yaml.safe_load(source.read_text())
    data["name"] = f"{data['name']}-profiled"
    data["platform"]["cold_start_s"] = round(result.cold_start_s, 6)
    data["platform"]["warm_start_s"] = round(
        max(result.invocation_overhead_s, result.warm_start_s), 6
    )
    for name, measured in result.stores.items():
        entry = data["storage"][name]
        entry["latency_s"] = float(f"{max(measured.sync_latency_s, measured.latency_s):.3g}")
        entry["connection_mbps"] = float(f"{measured.bandwidth_mbps:.4g}")
        if measured.scheme_latency_s:
            entry["scheme_latency_s"] = {
                scheme: float(f"{max(ell, 1e-6):.3g}")
                for scheme, ell in measured.scheme_latency_s.items()
            }
    catalog_path = folder / "catalog.yaml"
    catalog_path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_catalog(catalog_path)  # what we wrote must read back
    from faasml.workload import load_workload

    load_workload(workload_path)
    return workload_path, catalog_path
