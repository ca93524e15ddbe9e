"""The demo tuning job on the local platform vs a 2-node local Ray cluster.

Prints, per platform: the wall time and the bill of the demo job (``examples/tune-logreg.yaml``,
shrunk by ``--trials`` and ``--samples`` so it fits a small machine), its cold starts, and the
overhead of one warm invocation (mean and median round trip of a no-op function, which is
all platform overhead).

Run: .venv/bin/python benchmarks/bench_platforms.py [--trials 4] [--samples 4000] [--calls 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from faasml.catalog import load_catalog
from faasml.job import load_job
from faasml.runtime.platforms.contract import open_platform
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.testing.ray_cluster import local_ray_cluster
from faasml.types import Constraint

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tune-logreg.yaml"


def overhead(name: str, calls: int, **options: Any) -> tuple[float, float, float]:
    """Cold first call, then mean and median seconds of warm no-op round trips."""
    with open_platform(name, load_catalog("local"), **options) as platform:
        start = time.perf_counter()
        platform.invoke("faasml.testing.functions:echo", 0, 256).result(timeout=120)
        cold = time.perf_counter() - start
        samples = []
        for index in range(calls):
            start = time.perf_counter()
            platform.invoke("faasml.testing.functions:echo", index, 256).result(timeout=60)
            samples.append(time.perf_counter() - start)
    return cold, statistics.mean(samples), statistics.median(samples)


def demo(name: str, folder: Path, trials: int, samples: int, **options: Any) -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["tuning"]["trials"] = trials
    data["dataset"]["samples"] = samples
    data["platform"] = name
    job_file = folder / f"job-{name}.yaml"
    job_file.write_text(yaml.safe_dump(data))
    run = TuneRun(
        load_job(job_file),
        Constraint(budget_usd=0.05),
        folder / f"run-{name}",
        platform_options=options,
    )
    run.plan()
    start = time.perf_counter()
    state = record_to_json(run.execute())
    return {
        "status": state["status"],
        "wall_s": time.perf_counter() - start,
        "bill_usd": sum(c["usd"] for c in state["charges"]),
        "cold_starts": state.get("cold_starts", 0),
        "best_loss": (state.get("best") or {}).get("val_loss"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()

    rows = []
    with (
        local_ray_cluster(nodes=2, cpus_per_node=2) as cluster,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for name, options in (("local", {}), ("ray", {"address": cluster.address})):
            cold, mean, median = overhead(name, args.calls, **options)
            result = demo(name, Path(tmp), args.trials, args.samples, **options)
            rows.append((name, cold, mean, median, result))
    print(f"demo job: tune-logreg, {args.trials} trials, {args.samples} samples, budget $0.05")
    print(
        f"{'platform':<16}{'status':<10}{'wall s':>8}{'bill $':>11}{'cold':>6}{'best loss':>11}"
        f"{'1st call s':>12}{'warm mean ms':>14}{'warm med ms':>13}"
    )
    for name, cold, mean, median, r in rows:
        label = "ray (2 nodes)" if name == "ray" else name
        loss = "-" if r["best_loss"] is None else f"{r['best_loss']:.4f}"
        print(
            f"{label:<16}{r['status']:<10}{r['wall_s']:>8.1f}{r['bill_usd']:>11.6f}"
            f"{r['cold_starts']:>6}{loss:>11}{cold:>12.2f}{mean * 1e3:>14.1f}{median * 1e3:>13.1f}"
        )


if __name__ == "__main__":
    main()
