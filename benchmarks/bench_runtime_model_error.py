"""Predicted against measured epoch time and bill on the local platform (MISSION C2, C7).

    .venv/bin/python benchmarks/bench_runtime_model_error.py [--samples 200000] [--epochs 3]

1. Calibrates the model with `faasml profile` (u(m), effective store latency, per-invocation
   overhead, cold start).
2. Trains the job for 1 + EPOCHS epochs at each (n, memory, scheme) of a small grid and
   compares the median warm epoch's measured wall time and bill with t'(θ) and c'(θ) of
   CE-scaling eqs. 2–5 (``faasml.models.evaluate``).
3. Prints the coordinator's overhead per epoch (wall time of ``Coordinator.run`` beyond the
   segments' own time: launching, polling, committing) and the communication time per
   iteration of each scheme against n, measured and by eq. 3.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from faasml.catalog import load_catalog
from faasml.config import JobSpec
from faasml.models import evaluate
from faasml.models.sync import sync_time
from faasml.runtime.billing import Meter
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.platform import open_platform
from faasml.runtime.profiling import profile_job, write_profile
from faasml.runtime.session import job_workload
from faasml.runtime.worker import ModelRecipe
from faasml.sync.stores import open_store
from faasml.types import Allocation


def job(samples: int) -> JobSpec:
    return JobSpec.from_mapping(
        {
            "name": "bench-logreg",
            "model": "logistic-regression",
            "dataset": {"synthetic": "higgs-like", "samples": samples, "test_fraction": 0.1},
            "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
            "batch_size": 256,
            "seed": 0,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200000)
    parser.add_argument("--epochs", type=int, default=3, help="warm epochs measured per allocation")
    args = parser.parse_args()
    spec = job(args.samples)
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-"))
    result = profile_job(spec, memories=(512, 1024), counts=(2, 3), rounds=16, work_dir=work / "p")
    workload_path, catalog_path = write_profile(spec, result, work / "profile")
    spec = dataclasses.replace(spec, profile=str(workload_path), catalog=str(catalog_path))
    catalog = load_catalog(catalog_path)
    train, test = spec.dataset.load()
    model = spec.model.build(train.input_shape, train.num_classes)
    workload = job_workload(spec, train, model)
    recipe = ModelRecipe(
        "logistic-regression",
        {},
        train.input_shape,
        train.num_classes,
        "sgd",
        {"lr": 0.05, "momentum": 0.9},
        256,
        0,
    )
    grid = [Allocation(1, m, "embedded") for m in (512, 1024)]
    grid += [
        Allocation(n, m, "embedded", s)
        for n in (2, 3)
        for m in (512, 1024)
        for s in ("allreduce", "scatter-reduce")
    ]
    print(f"job: LR on {len(train)} higgs-like samples ({workload.dataset_mb:.1f} MB), batch 256")
    print(
        f"profile: u(m) {[(m, f'{u:.3g}') for m, u in result.compute_points]} s/MB, "
        "effective latency "
        + ", ".join(
            f"{scheme} {ell * 1e6:.0f} µs"
            for scheme, ell in result.stores["embedded"].scheme_latency_s.items()
        )
        + ", "
        f"per-invocation overhead {result.invocation_overhead_s * 1e3:.1f} ms, "
        f"cold start {result.cold_start_s:.2f} s"
    )
    rows, time_errors, cost_errors, overheads, comms = [], [], [], [], []
    objects = open_store(f"embedded://{work / 'objects'}")
    with open_platform("local", catalog) as platform:
        meter = Meter(catalog)
        coordinator = Coordinator(
            platform,
            catalog,
            meter,
            objects,
            f"embedded://{work / 'sync'}",
            lambda _: recipe,
            namespace="b",
        )
        coordinator.set_data(train, test)
        for index, allocation in enumerate(
            [*grid, *(Allocation(n, 512, "embedded", "param-server") for n in (2, 3))]
        ):
            trial = TrialState(index, {})
            coordinator.run([trial], allocation, 1)  # cold epoch
            spent = meter.total_usd
            start = time.monotonic()
            coordinator.run([trial], allocation, 1 + args.epochs)
            wall = time.monotonic() - start
            warm = trial.history[1:]
            overheads.append(
                (wall - sum(h["epoch_s"] for h in warm)) / sum(h["epoch_s"] for h in warm)
            )
            epoch = {key: statistics.median(h[key] for h in warm) for key in ("epoch_s", "sync_s")}
            measured_s = epoch["epoch_s"]
            measured_usd = (meter.total_usd - spent) / args.epochs
            rounds = workload.iterations_per_epoch(allocation.n)
            comm = epoch["sync_s"] / max(int(rounds), 1)
            if allocation.scheme == "param-server":
                comms.append((allocation.n, allocation.scheme, comm, float("nan")))
                continue
            table = evaluate(
                workload,
                catalog,
                [allocation.n],
                [allocation.memory_mb],
                "embedded",
                allocation.scheme,
            )
            predicted_s, predicted_usd = float(table.time_s[0]), float(table.cost_usd[0])
            model_comm = float(
                sync_time(
                    allocation.scheme,
                    allocation.n,
                    workload.model_mb,
                    min(
                        float(catalog.platform.network_mbps(allocation.memory_mb)),
                        catalog.storage("embedded").connection_mbps,
                    ),
                    catalog.storage("embedded").latency_for(allocation.scheme),
                )
            )
            if allocation.n > 1:
                comms.append((allocation.n, allocation.scheme, comm, model_comm))
            time_errors.append(abs(measured_s - predicted_s) / measured_s)
            cost_errors.append(abs(measured_usd - predicted_usd) / measured_usd)
            rows.append((allocation, predicted_s, measured_s, predicted_usd, measured_usd))
        coordinator.close()
    objects.close()
    print(
        "\nallocation                          pred s   meas s  err   pred $       meas $       err"
    )
    for a, ps, ms, pc, mc in rows:
        print(
            f"{a.n} × {a.memory_mb:>4} MB {a.scheme:<15} {ps:8.3f} {ms:8.3f} "
            f"{abs(ms - ps) / ms:5.0%}  {pc:.3e}  {mc:.3e}  {abs(mc - pc) / mc:5.0%}"
        )
    print(
        f"\nmedian error: time {statistics.median(time_errors):.1%}, "
        f"bill {statistics.median(cost_errors):.1%} over {len(rows)} allocations"
    )
    print(
        f"coordinator overhead per epoch: median {statistics.median(overheads):.1%} "
        f"of the epoch time (max {max(overheads):.1%})"
    )
    print("\ncommunication per iteration (measured, model eq. 3):")
    for n, scheme, comm, model_comm in sorted(comms):
        model_text = "-" if model_comm != model_comm else f"{model_comm * 1e3:.2f} ms"
        print(f"  n={n} {scheme:<15} {comm * 1e3:7.2f} ms   {model_text}")


if __name__ == "__main__":
    main()
