"""Predicted against measured time and bill of real runs on the local platform (MISSION C2, C7).

    .venv/bin/python benchmarks/bench_runtime_model_error.py [--jobs NAME ...] [--stages]
    .venv/bin/python benchmarks/bench_runtime_model_error.py --compare-planning [--jobs ...]
    .venv/bin/python benchmarks/bench_runtime_model_error.py --allocations [--samples 200000]

Job set (the default): every example in examples/ (seconds long) and the jobs in
benchmarks/jobs/ (an MLP on tabular data, a CNN with BatchNorm, a small transformer on
sequences; tens of seconds and more), each run for real (``TuneRun``, or ``TrainRun`` for a
training job) once under a budget, with a fresh profile cache so that measuring the job is done
and billed, and once under a deadline, reusing that profile from the cache. One line
per (job, constraint): the plan's first prediction of the whole run's time and bill against
the measurement, the error after live re-calibration (stages after the first, re-predicted
against measured), trials lost to out-of-memory, and what profiling cost. The measured bill
leaves profiling out where it is compared with the plan (the plan predicts the run, after the
job was measured); the measured time is the run's, from the first stage to the last.

Allocations (``--allocations``, slower):

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
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from faasml.catalog import load_catalog
from faasml.job import JobSpec, from_mapping
from faasml.models import evaluate
from faasml.models.sync import sync_time
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.function.worker import ModelRecipe
from faasml.runtime.platforms.contract import open_platform
from faasml.runtime.profile.calibrate import profile_job, write_profile
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import job_workload
from faasml.sync.stores import open_store
from faasml.types import Allocation
from faasml.workloads.build import build_model, load_data


def job(samples: int) -> JobSpec:
    return from_mapping(
        {
            "name": "bench-logreg",
            "model": "logistic-regression",
            "dataset": {"synthetic": "higgs-like", "samples": samples, "test_fraction": 0.1},
            "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
            "batch_size": 256,
            "seed": 0,
        }
    )


def allocations(args: argparse.Namespace) -> None:
    spec = job(args.samples)
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-"))
    result = profile_job(spec, memories=(512, 1024), counts=(2, 3), rounds=16, work_dir=work / "p")
    workload_path, catalog_path = write_profile(spec, result, work / "profile")
    spec = dataclasses.replace(spec, profile=str(workload_path), catalog=str(catalog_path))
    catalog = load_catalog(catalog_path)
    train, test = load_data(spec.dataset)
    model = build_model(spec.model, train.input_shape, train.num_classes)
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


ROOT = Path(__file__).resolve().parent.parent
JOBS_DIR = ROOT / "benchmarks" / "jobs"

# (job file, run kind, budget USD, deadline s). The examples are seconds long (a demo's
# length: fixed costs dominate them); the benchmark jobs train for tens of seconds to minutes,
# as a user's jobs do. The deadline run of a job reuses the profile its budget run measured
# (the cache, as a user's second run does: no profiling billed).
EXAMPLES: list[tuple[str, str, float, float]] = [
    ("examples/tune-logreg.yaml", "tune", 0.002, 60.0),
    ("examples/tune-cnn.yaml", "tune", 0.005, 120.0),
    ("examples/tune-digits.yaml", "tune", 0.01, 120.0),
    ("examples/train-logreg.yaml", "train", 0.001, 60.0),
]
LONG_JOBS: list[tuple[str, str, float, float]] = [
    ("benchmarks/jobs/tune-mlp.yaml", "tune", 0.03, 300.0),
    ("benchmarks/jobs/tune-bn-cnn.yaml", "tune", 0.03, 300.0),
    ("benchmarks/jobs/tune-transformer.yaml", "tune", 0.03, 300.0),
]
JOB_SET = EXAMPLES + LONG_JOBS

TARGET_FIRST = 0.10
TARGET_END = 0.05
TARGET_PROFILING = 0.05


def _err(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured if measured > 0 else float("nan")


def _pct(value: float | None) -> str:
    return "    -" if value is None or value != value else f"{value:5.0%}"


def run_job(
    path: str,
    kind: str,
    constraint: Any,
    work: Path,
    plan_contention: bool = True,
    audit: bool = False,
    epochs_per_stage: int | None = None,
) -> dict[str, Any]:
    """One real run of ``path`` under ``constraint``; what the line and the medians need.
    ``plan_contention`` False plans as if every function had its share of the machine (the
    predictions still price contention): the planning before the planners priced it.
    ``audit`` traces the run (``run_audit``) and keeps what the audit lines need.
    ``epochs_per_stage`` replaces the tuning job's (a longer run of the same job)."""
    import contextlib
    import copy

    from faasml.job import load_job
    from faasml.runtime.runs.session import TrainRun, TuneRun
    from run_audit import traced

    job = load_job(ROOT / path)
    if epochs_per_stage is not None and job.tuning is not None:
        tuning = dataclasses.replace(job.tuning, epochs_per_stage=epochs_per_stage)
        job = dataclasses.replace(job, tuning=tuning)
    cls = TrainRun if kind == "train" else TuneRun
    run = cls(job, constraint, work)
    run.plan_contention = plan_contention
    began = time.monotonic()
    tracing = traced() if audit and kind == "tune" else contextlib.nullcontext()
    with LoadSampler() as load, tracing as trace:
        try:
            plan = run.plan()
        except Exception:
            if run._platform is not None:  # measured, then could not plan: close its functions
                run._platform.close()
            raise
        first = (run.workload, run.plan_catalog, copy.deepcopy(run.record.plan))
        state = record_to_json(run.execute())
    wall = time.monotonic() - began
    charges = state["charges"]
    profiling_usd = sum(c["usd"] for c in charges if c["kind"] == "profiling")
    total_usd = sum(c["usd"] for c in charges)
    stages = state["plan"]["stages"]
    if kind == "tune":
        predicted_s = sum(s["predicted_time_s"] for s in stages)
        predicted_usd = sum(s["predicted_cost_usd"] for s in stages)
    else:
        predicted_s, predicted_usd = float(plan["time_s"]), float(plan["cost_usd"])
    end_time, end_cost = [], []
    for stage in stages[1:]:
        if "repredicted_time_s" in stage and "measured_time_s" in stage:
            end_time.append(_err(stage["repredicted_time_s"], stage["measured_time_s"]))
            end_cost.append(_err(stage["repredicted_cost_usd"], stage["measured_cost_usd"]))
    run_usd = sum(c["usd"] for c in charges if c["kind"] != "profiling")
    for made in state["plan"].get("repredictions", []) if kind == "train" else []:
        # A training run's one stage: the rest as re-predicted after each re-calibration
        # (epochs 2, 4, 8, ...) against what the rest measured; per epoch it ran, where the
        # target stopped it before the epochs re-predicted.
        ran = state["trials"][0]["epochs_done"] - made["epoch"]
        if ran > 0:
            share = ran / made["rest_epochs"]
            rest_s = float(state["elapsed_s"]) - made["at_s"]
            end_time.append(_err(made["rest_time_s"] * share, rest_s))
            end_cost.append(_err(made["rest_cost_usd"] * share, run_usd - made["spent_usd"]))
    oom = [
        t["trial_id"]
        for t in state["trials"]
        if t["status"] == "failed" and any("out-of-memory" in f for f in t.get("failures", []))
    ]
    planned_epochs = sum(s["trials"] * s["epochs"] for s in stages)
    run_epochs = sum(len(t["history"]) for t in state["trials"])
    measured_s = float(state["elapsed_s"])
    measured_usd = total_usd - profiling_usd
    allocations = sorted(
        {
            f"{s['allocation']['n']}x{s['allocation']['memory_mb']}"
            for s in stages
            if "measured_time_s" in s or kind == "train"
        }
    )
    return {
        "status": state["status"],
        "epochs": f"{run_epochs}/{planned_epochs}",
        "predicted_s": predicted_s,
        "predicted_usd": predicted_usd,
        "measured_s": measured_s,
        "measured_usd": measured_usd,
        "time_err": _err(predicted_s, measured_s),
        "cost_err": _err(predicted_usd, measured_usd),
        "end_time": statistics.mean(end_time) if end_time else None,
        "end_cost": statistics.mean(end_cost) if end_cost else None,
        "oom": oom,
        "profiling_usd": profiling_usd,
        "profiling_s": float(state["profile"]["profiling_s"]),
        "profiling_share": profiling_usd / total_usd if total_usd > 0 else float("nan"),
        "allocations": ",".join(allocations),
        "wall_s": wall,
        "cached": bool(state.get("profile_cached", False)),
        "load": load.mean(),
        "stages": [
            (
                s.get("predicted_time_s"),
                s.get("repredicted_time_s"),
                s.get("measured_time_s"),
                s.get("predicted_cost_usd"),
                s.get("repredicted_cost_usd"),
                s.get("measured_cost_usd"),
                f"{s['trials']}x{s['allocation']['n']}x{s['allocation']['memory_mb']}",
            )
            for s in stages
        ],
        "profile": state["profile"],
        "audit": None
        if trace is None
        else (run, (*first[:2], first[2].stages if first[2] else []), trace),
    }


class LoadSampler:
    """The machine's run-queue length (/proc/loadavg's 1-minute figure is too slow for runs of
    seconds: the number of runnable tasks, sampled every half second, our own included)."""

    def __init__(self) -> None:
        import threading

        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with open("/proc/loadavg") as handle:
                    running = handle.read().split()[3].split("/")[0]
                self.samples.append(float(running) - 1)  # less this sampler's own process
            except (OSError, IndexError, ValueError):
                return
            self._stop.wait(0.5)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def mean(self) -> float:
        return statistics.mean(self.samples) if self.samples else float("nan")


def measure_only(path: str, kind: str, work: Path) -> None:
    """Measure ``path``'s profile into the cache (billed nowhere), so that every run after
    it, of either planning, starts from the same cached profile."""
    from faasml.job import load_job
    from faasml.runtime.runs.session import TrainRun, TuneRun
    from faasml.types import Constraint

    cls = TrainRun if kind == "train" else TuneRun
    run = cls(load_job(ROOT / path), Constraint(budget_usd=1.0), work)
    try:
        run.measured()
    finally:
        if run._platform is not None:
            run._platform.close()


def job_set(
    names: list[str] | None,
    show_stages: bool,
    compare: bool = False,
    audit: bool = False,
    epochs_per_stage: int | None = None,
) -> None:
    from faasml.types import Constraint

    # The BatchNorm CNN is a user factory in benchmarks/jobs: importable here and in workers.
    sys.path.insert(0, str(JOBS_DIR))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(JOBS_DIR), os.environ.get("PYTHONPATH", "")) if p
    )
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-runs-"))
    print(
        "Real runs on the local platform, each job under a budget, then under a deadline.\n"
        "pred = the plan's first prediction of the whole run; meas = the run (time from its first\n"
        "stage to its last; bill WITHOUT profiling, which the plan does not predict); end = mean\n"
        "|error| of the stages after the first, re-predicted after live re-calibration against\n"
        "measured (a training run: the rest after epochs 2, 4, 8, ..., re-predicted there);\n"
        "prof = profiling's bill and its share of the job's whole bill (the deadline\n"
        "run reuses the budget run's profile: 'cached', nothing billed); load = runnable tasks\n"
        "on the machine, mean over the run (ours included; the machine has "
        f"{os.cpu_count()} cores).\n"
    )
    header = (
        f"{'job':<17} {'constraint':<9} {'status':<9} {'pred s':>7} {'meas s':>7} {'err':>5} "
        f"{'err $':>5} {'end t':>5} {'end $':>5} {'OOM':>3} {'prof $':>9} {'share':>6} "
        f"{'load':>4}  allocations"
    )
    rows: list[tuple[str, str, bool, dict[str, Any]]] = []
    shown: bool | None = None  # the group whose header was printed last
    for index, (path, kind, budget, deadline) in enumerate(JOB_SET):
        name = Path(path).stem
        if names and name not in names:
            continue
        long_job = (path, kind, budget, deadline) in LONG_JOBS
        if long_job != shown:
            shown = long_job
            print(
                "\n"
                + (
                    "benchmark jobs (tens of seconds and more)"
                    if long_job
                    else "examples (seconds long)"
                )
            )
            print(header)
        # A fresh profile cache per job: its first run measures it (and is billed for it).
        os.environ["FAASML_CACHE"] = tempfile.mkdtemp(prefix="faasml-bench-cache-")
        if compare:  # both plannings start from the same cached profile
            measure_only(path, kind, work / f"{index}-profile")
        runs = [
            (f"${budget:g}", Constraint(budget_usd=budget)),
            (f"{deadline:g} s", Constraint(deadline_s=deadline)),
        ]
        modes = (False, True) if compare else (True,)
        for (label, constraint), mode in [(r, m) for r in runs for m in modes]:
            if compare:
                label = f"{label} {'k' if mode else 'f'}"
            try:
                row = run_job(
                    path,
                    kind,
                    constraint,
                    work / f"{index}-{len(rows)}",
                    mode,
                    audit,
                    epochs_per_stage,
                )
            except Exception as err:  # an infeasible constraint, a failed measurement
                print(f"{name:<17} {label:<9} error: {type(err).__name__}: {err}")
                continue
            row["plan_contention"] = mode
            rows.append((name, label, long_job, row))
            r = row
            share = "cached" if r["cached"] else _pct(r["profiling_share"])
            print(
                f"{name:<17} {label:<9} {r['status'][:9]:<9} {r['predicted_s']:7.2f} "
                f"{r['measured_s']:7.2f} {_pct(r['time_err'])} {_pct(r['cost_err'])} "
                f"{_pct(r['end_time'])} {_pct(r['end_cost'])} {len(r['oom']):>3} "
                f"{r['profiling_usd']:9.3e} {share:>6} {r['load']:4.1f}  {r['allocations']}",
                flush=True,
            )
            if show_stages or audit:
                _print_stages(r)
            if r["audit"] is not None:
                from run_audit import print_audit

                print_audit(*r["audit"])
                r["audit"] = None  # the run and its trace are not kept past their lines
    if not rows:
        return
    groups = [
        ("examples (seconds long)", [r for r in rows if not r[2]]),
        ("benchmark jobs (tens of seconds and more)", [r for r in rows if r[2]]),
    ]
    groups = [(title, chosen) for title, chosen in groups if chosen]
    if len(groups) > 1:
        groups.append(("all runs", rows))
    if compare:
        groups = [
            (f"{title}, {what}", [r for r in chosen if r[3]["plan_contention"] == mode])
            for title, chosen in groups
            for mode, what in (
                (False, "planned at full vCPU shares (f, before)"),
                (True, "planned with the delivered vCPUs (k, after)"),
            )
        ]
        groups = [(title, chosen) for title, chosen in groups if chosen]
    for title, chosen in groups:
        _summary(title, chosen)


def _print_stages(r: dict[str, Any]) -> None:
    """Per stage: predicted before the run, re-predicted, measured (time; bill)."""
    for i, (pt, rt, mt, pc, rc, mc, shape) in enumerate(r["stages"], 1):

        def sec(v: float | None) -> str:
            return "      -" if v is None else f"{v:7.2f}"

        def usd(v: float | None) -> str:
            return "        -" if v is None else f"{v:9.2e}"

        print(
            f"    stage {i} {shape:<12} time {sec(pt)} {sec(rt)} {sec(mt)}   "
            f"bill {usd(pc)} {usd(rc)} {usd(mc)}"
        )
    p = r["profile"]
    print(
        f"    profile: cold start {p['cold_start_s']:.2f} s at 1 vCPU, side by side "
        f"{p.get('side_by_side_ratio', 0):.2f}x ({p.get('delivered_vcpus', 0):.2f} vCPUs "
        f"delivered), probe {p['profiling_s']:.1f} s"
    )
    for scheme, transfer, wait in p.get("sync_rounds", ()):
        print(
            f"    sync round of 2 ({p.get('sync_storage')}, {scheme}): transfer "
            f"{transfer * 1e3:.2f} ms + straggler wait {wait * 1e3:.2f} ms"
        )


def _summary(title: str, rows: list[tuple[str, str, bool, dict[str, Any]]]) -> None:
    first_t = statistics.median(r["time_err"] for *_, r in rows)
    first_c = statistics.median(r["cost_err"] for *_, r in rows)
    ends = [r for *_, r in rows if r["end_time"] is not None]
    print(f"\n{title}: {len(rows)} runs; every measured bill above excludes profiling.")
    print(
        f"  median |error|, first prediction: time {first_t:.1%}, bill {first_c:.1%} "
        f"(target <= {TARGET_FIRST:.0%})"
    )
    if ends:
        end_t = statistics.median(r["end_time"] for r in ends)
        end_c = statistics.median(r["end_cost"] for r in ends)
        print(
            f"  median |error| after re-calibration: time {end_t:.1%}, bill {end_c:.1%} over "
            f"{len(ends)} runs with stages after the first (target <= {TARGET_END:.0%})"
        )
    oom = [(n, c, r["oom"]) for n, c, _, r in rows if r["oom"]]
    print(
        "  trials lost to out-of-memory: "
        + ("none" if not oom else "; ".join(f"{n} {c}: trials {t}" for n, c, t in oom))
    )
    measured = [r for *_, r in rows if not r["cached"]]
    if measured:
        shares = [r["profiling_share"] for r in measured]
        print(
            f"  profiling: median {statistics.median(shares):.1%} of the job's bill over "
            f"{len(measured)} runs that measured their job (target <= {TARGET_PROFILING:.0%}); "
            f"{len(rows) - len(measured)} runs used the cached profile: $0"
        )
    loads = [r["load"] for *_, r in rows if r["load"] == r["load"]]
    if loads:
        print(f"  machine load: {min(loads):.1f} to {max(loads):.1f} runnable tasks (mean per run)")
    print("  where a target is missed (run: value):")
    for what, key, target in (
        ("first prediction, time", "time_err", TARGET_FIRST),
        ("first prediction, bill", "cost_err", TARGET_FIRST),
        ("after re-calibration, time", "end_time", TARGET_END),
        ("after re-calibration, bill", "end_cost", TARGET_END),
        ("profiling share of the bill", "profiling_share", TARGET_PROFILING),
    ):
        over = [
            (n, c, r[key])
            for n, c, _, r in rows
            if r[key] is not None
            and r[key] > target
            and not (key == "profiling_share" and r["cached"])
        ]
        counted = sum(1 for *_, r in rows if r[key] is not None)
        listed = ", ".join(f"{n} {c}: {v:.0%}" for n, c, v in over) or "none"
        print(f"    {what} > {target:.0%}: {len(over)} of {counted} runs ({listed})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--allocations",
        action="store_true",
        help="the per-allocation epoch error and communication section instead (slower)",
    )
    parser.add_argument("--jobs", nargs="*", help="job file stems to run (default: all)")
    parser.add_argument(
        "--stages", action="store_true", help="per stage: predicted, re-predicted, measured"
    )
    parser.add_argument(
        "--compare-planning",
        action="store_true",
        help="each run twice, planned at full vCPU shares (f) and with the vCPUs the probe "
        "measured the machine delivering (k), from one cached profile",
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="per stage and component (cold start, loading, computation, evaluation, "
        "synchronisation, round trip, the coordinator's time): predicted, re-predicted, measured",
    )
    parser.add_argument(
        "--epochs-per-stage",
        type=int,
        help="replace each tuning job's epochs per stage (a longer run of the same job: "
        "profiling's share of a bill the size of a user's)",
    )
    parser.add_argument("--samples", type=int, default=200000, help="--allocations: LR samples")
    parser.add_argument(
        "--epochs", type=int, default=3, help="--allocations: warm epochs per allocation"
    )
    args = parser.parse_args()
    if args.allocations:
        allocations(args)
    else:
        job_set(args.jobs, args.stages, args.compare_planning, args.audit, args.epochs_per_stage)


if __name__ == "__main__":
    main()
