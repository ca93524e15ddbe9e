"""`faasml profile`: calibrate the performance model from a short run of the real job."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from rich.markup import escape

from faasml.catalog import load_catalog
from faasml.cli._common import console, output_folder, say
from faasml.cli.run_console import PrepareDisplay
from faasml.exceptions import ConfigError
from faasml.job import load_job
from faasml.runtime.platforms.contract import open_platform
from faasml.runtime.profile.calibrate import profile_job, write_profile
from faasml.runtime.profile.measure import (
    fitting_memory_mb,
    measure_job,
    platform_options_for,
    roomy_memory_mb,
)
from faasml.units import format_duration
from faasml.workloads.build import build_model, load_data


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "profile",
        help="run a few iterations of a job and write the workload profile the planners use",
        description="Run a few iterations of JOB at a few memory sizes and function counts on "
        "its platform and every store the job names (store and stores), fit u(m), each "
        "store's latency and bandwidth and the cold start, and write workload.yaml and "
        "catalog.yaml (point the job's `profile:` and `catalog:` at them).",
    )
    parser.add_argument("job", help="a job file (YAML)")
    parser.add_argument(
        "--out", default="profile", help="folder for the profile (default: profile)"
    )
    parser.add_argument(
        "--memories",
        default="auto",
        help="memory sizes in MB, e.g. 512,1024 (default auto: the least that holds the job's "
        "measured footprint + 20 %%, and one vCPU's worth)",
    )
    parser.add_argument(
        "--reprofile",
        action="store_true",
        help="measure the job again (not the cached profile, nor a re-check of it)",
    )
    parser.add_argument("--counts", default="2", help="function counts for the sync measurement")
    parser.add_argument("--rounds", type=int, default=8, help="rounds per measurement (default 8)")
    parser.set_defaults(func=run_profile)


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(
            f"the value of {flag} is {text!r}, but must be integers like 256,512"
        ) from None
    if not values or min(values) < 1:
        raise ConfigError(f"the value of {flag} is {text!r}, but must list integers >= 1")
    return values


def run_profile(args: argparse.Namespace) -> int:
    if args.rounds < 1:
        raise ConfigError(f"the value of --rounds is {args.rounds}, but must be >= 1")
    job = load_job(args.job)
    out = console()
    asked = None if args.memories == "auto" else _ints(args.memories, "--memories")
    asked_counts = _ints(args.counts, "--counts")
    output_folder(args.out, "--out")  # before the minutes of profiling: it can be written
    catalog = load_catalog(job.catalog)
    train, _ = load_data(job.dataset)
    model = build_model(job.model, train.input_shape, train.num_classes)
    options = platform_options_for(job, model, {})
    with open_platform(job.platform, catalog, **options) as platform, PrepareDisplay(out) as shown:
        profile = measure_job(
            job, catalog, platform, platform_options=options, refresh=args.reprofile, on_step=shown
        )
    for line in profile.summary_lines():
        say(out, line)
    if profile.check is not None:
        say(out, profile.check.line())
    floor = profile.memory_floor_mb()
    if asked is None:
        memories = tuple(sorted({fitting_memory_mb(floor, catalog), roomy_memory_mb(catalog)}))
    else:
        memories = asked
        small = [m for m in memories if m < floor]
        if small:
            raise ConfigError(
                f"the value of --memories has {', '.join(map(str, small))} MB, but a function "
                f"of job {job.name} needs at least {floor:.0f} MB (its measured footprint "
                f"{profile.footprint_mb:.0f} MB + 20 %); leave --memories out to choose sizes"
            )
    counts = tuple(n for n in asked_counts if n > 1)
    rounds = f"counts {counts}, {args.rounds} rounds"
    out.print(escape(f"Profiling {job.name}: memories {memories} MB, {rounds}"))
    with tempfile.TemporaryDirectory(prefix="faasml-profile-") as work:
        result = profile_job(
            job,
            memories=memories,
            counts=counts,
            rounds=args.rounds,
            work_dir=work,
            platform_options=options,
        )
    for memory, per_mb in result.compute_points:
        out.print(f"  u({memory} MB) = {per_mb:.4g} s per MB")
    out.print(
        f"  cold start {format_duration(result.cold_start_s)}, "
        f"warm start {result.warm_start_s * 1e3:.1f} ms, "
        f"per-invocation overhead {result.invocation_overhead_s * 1e3:.1f} ms"
    )
    for name, store in result.stores.items():
        out.print(
            f"  store {name}: latency {store.latency_s * 1e6:.0f} µs, "
            f"{store.bandwidth_mbps:.0f} MB/s; effective latency per transfer "
            f"(eq. 3 fitted) {store.sync_latency_s * 1e6:.0f} µs"
        )
        for key, value in sorted(store.sync_s_per_round.items()):
            out.print(f"    sync {key}: {value * 1e3:.2f} ms per round")
    workload_path, catalog_path = write_profile(job, result, Path(args.out))
    out.print(escape(f"Wrote {workload_path} and {catalog_path}; use them in the job file:"))
    out.print(escape(f"  profile: {workload_path}\n  catalog: {catalog_path}"))
    return 0
