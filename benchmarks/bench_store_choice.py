"""Storage selection from measured profiles (MISSION C8; CE-scaling Finding 3).

    .venv/bin/python benchmarks/bench_store_choice.py [--samples 20000] [--counts 2,3]

1. Starts Redis, Memcached and an S3-compatible server (moto) on loopback and profiles the job
   with `faasml profile`'s calibration over every store it names: embedded, redis, memcached,
   s3 (latency and bandwidth from inside a function, sync rounds per scheme, eq. 3 fitted).
2. With the measured catalog (prices untouched: S3 per request, Redis and Memcached per node
   hour, the embedded store free), prints for each model size (0.1, 12, 90 MB) and worker
   count (as many as this machine holds at 512 MB) each store's epoch time and cost by
   CE-scaling eqs. 2–5 with its faster scheme, marking the fastest and the cheapest: the rows
   the planners choose from, per allocation.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

from faasml.catalog import Catalog, load_catalog
from faasml.job import JobSpec, from_mapping
from faasml.models import evaluate
from faasml.runtime.profile.calibrate import profile_job, write_profile
from faasml.testing.servers import MemcachedServer, MotoServer, RedisServer
from faasml.workload import Workload, load_workload

MEMORY_MB = 512
COUNTS = (2, 3, 4, 6)
"""Worker counts this machine's capacity allows at MEMORY_MB (2 cores, 0.29 vCPU each)."""


def job(samples: int, stores: dict[str, str]) -> JobSpec:
    return from_mapping(
        {
            "name": "bench-store-choice",
            "model": "logistic-regression",
            "dataset": {"synthetic": "higgs-like", "samples": samples, "test_fraction": 0.1},
            "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
            "batch_size": 256,
            "seed": 0,
            "stores": stores,
        }
    )


def best_by_store(
    workload: Workload, catalog: Catalog, n: int, memory_mb: int
) -> dict[str, tuple[float, float, str]]:
    """Storage -> (epoch seconds, epoch dollars, scheme) of its fastest scheme at (n, m)."""
    out: dict[str, tuple[float, float, str]] = {}
    for storage, scheme in catalog.sync_options():
        table = evaluate(workload, catalog, [n], [memory_mb], storage, scheme)
        if len(table) == 0:
            continue
        row = (float(table.time_s[0]), float(table.cost_usd[0]), scheme)
        if storage not in out or row[0] < out[storage][0]:
            out[storage] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--counts", default="2,3", help="function counts profiled")
    args = parser.parse_args()
    counts = tuple(int(c) for c in args.counts.split(","))
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-"))
    with RedisServer() as redis, MemcachedServer() as memcached, MotoServer() as moto:
        stores = {
            "redis": redis.url,
            "memcached": memcached.url,
            "s3": moto.s3_url("bench-store-choice"),
        }
        spec = job(args.samples, stores)
        result = profile_job(spec, memories=(512, 1024), counts=counts, rounds=8, work_dir=work)
    workload_path, catalog_path = write_profile(spec, result, work / "profile")
    print(f"measured on this machine (counts {counts}):")
    print(f"{'store':>10} {'latency':>9} {'MB/s':>7} {'fitted ℓ':>9}  sync ms per round")
    for name, store in result.stores.items():
        rounds = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in sorted(store.sync_s_per_round.items()))
        print(
            f"{name:>10} {store.latency_s * 1e6:7.0f}µs {store.bandwidth_mbps:7.0f} "
            f"{store.sync_latency_s * 1e6:7.0f}µs  {rounds}"
        )
    measured = load_catalog(catalog_path).restricted_to(list(result.stores))
    base = load_workload(workload_path)  # u(m) as measured
    names = list(result.stores)
    print(f"\nper epoch by CE-scaling eqs. 2–5 on the measured catalog, {MEMORY_MB} MB functions")
    print("(each store with its faster scheme; * fastest, $ cheapest; - infeasible):")
    print(f"{'model':>7} {'n':>3}  " + "  ".join(f"{name:>22}" for name in names))
    for model_mb in (0.1, 12.0, 90.0):
        workload = dataclasses.replace(base, model_mb=model_mb)
        for n in COUNTS:
            rows = best_by_store(workload, measured, n, MEMORY_MB)
            fast = min(rows, key=lambda s: rows[s][0], default=None)
            cheap = min(rows, key=lambda s: rows[s][1], default=None)
            cells = []
            for name in names:
                if name not in rows:
                    cells.append(f"{'-':>22}")
                    continue
                seconds, usd, _ = rows[name]
                mark = ("*" if name == fast else " ") + ("$" if name == cheap else " ")
                cells.append(f"{seconds:8.2f}s ${usd:.2e}{mark}")
            print(f"{model_mb:>5}MB {n:>3}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
