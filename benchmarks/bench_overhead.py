"""faasml's overhead: a real tuning run against the same training as a plain loop (MISSION C7).

    .venv/bin/python benchmarks/bench_overhead.py [--jobs tune-cnn tune-logreg]

For each job (examples/tune-cnn.yaml, tune-digits.yaml and tune-logreg.yaml, seconds long; the
MLP, the BatchNorm CNN and the transformer of benchmarks/jobs, whose epochs last seconds):

1. runs it with faasml for real (``TuneRun`` on the local platform, under the budget given
   below, with a fresh profile cache) and takes the run's wall time from its first stage to its
   last (``elapsed_s`` of the record): measuring the job (profiling) and planning come before
   it and are left out, the functions' cold starts, data partitions, synchronisation,
   checkpoints and evaluations are in;
2. trains the same trials the same number of epochs as a plain loop in this one process: each
   trial's model built with ``faasml.workloads.create_model`` and its optimiser with
   ``create_optimizer`` from the trial's configuration, the same batch size and data, as many
   epochs as the trial's history in ``record.json`` holds, each epoch followed by the held-out
   evaluation the run does too (numpy and torch on the machine's threads);
3. trains them again as a plain loop with every thread pool at one thread (torch's, and
   numpy's BLAS through threadpoolctl where installed): on a loaded machine a loop whose pools
   are sized to the machine's cores can be several times slower than one thread, which would
   flatter faasml (whose functions hold a CPU quota each);
4. prints the wall times and the ratio of faasml's to the faster plain loop (target <= 1.2x).

``--epochs-per-stage K`` runs each job with K epochs per tuning stage (the examples have one:
every segment then ends at a rung); ``--compare-segments`` runs each job twice, with the
segments the coordinator chooses (``auto``: several short epochs to an invocation) and with one
epoch per segment (``1-ep``), side by side in one sitting. ``--plan 1x1728,1x896,2x896`` fixes the
plan (n x MB per stage, the last repeated; re-planning off) and ``--compare-prewarm`` runs each
job twice on it, with the next stage's functions prewarmed during the last wave (``pre``) and
without (``cold``): what prewarming saves, on one plan. On a loaded machine the second run in
one process ran slower whatever it was (benchmarks/results/overhead.md): there, compare runs
in separate
processes, alternated (``--no-prewarm`` runs without). ``--breakdown`` prints, under each
job's line, where faasml's time went (the record's ``timings``, ``coordinator.TIMINGS``):
the workers' loading, training rounds and the rest of the function (evaluation, checkpoint),
invocation and dispatch outside the function, cold starts, the coordinator's launching and
commits (the record's rewrite among them), and the time between stages (re-calibration,
re-planning). Profiling is never in the ratio: it runs before the run's clock starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from faasml.job import apply_config
from faasml.workloads.build import load_data

ROOT = Path(__file__).resolve().parent.parent

# job file, budget (USD): generous, so the planner minimises the run's time.
JOBS: list[tuple[str, float]] = [
    ("examples/tune-cnn.yaml", 0.05),
    ("examples/tune-digits.yaml", 0.05),
    ("examples/tune-logreg.yaml", 0.05),
    # Jobs whose epochs last seconds, as a user's do (benchmarks/jobs).
    ("benchmarks/jobs/tune-mlp.yaml", 0.05),
    ("benchmarks/jobs/tune-bn-cnn.yaml", 0.05),
    ("benchmarks/jobs/tune-transformer.yaml", 0.05),
]
JOBS_DIR = ROOT / "benchmarks" / "jobs"
"""Where the benchmark jobs' own model code is (``bench_bn_cnn``): on the path of this process
(the plain loop) and of the functions (``PYTHONPATH``)."""
TARGET = 1.2


def faasml_run(
    path: Path,
    budget: float,
    work: Path,
    epochs_per_segment: int | None = None,
    plan: list[tuple[int, int]] | None = None,
    prewarm: bool = True,
) -> dict[str, Any]:
    from faasml.job import load_job
    from faasml.runtime.coordinator import CoordinatorOptions
    from faasml.runtime.record.codec import record_to_json
    from faasml.runtime.record.records import Estimate
    from faasml.runtime.runs.session import TuneRun
    from faasml.runtime.runs.stage_pricing import stage_estimates
    from faasml.types import Constraint

    os.environ["FAASML_CACHE"] = tempfile.mkdtemp(prefix="faasml-bench-cache-")
    options = CoordinatorOptions(epochs_per_segment=epochs_per_segment)
    run = TuneRun(load_job(path), Constraint(budget_usd=budget), work, options=options)
    run.prewarm = prewarm
    began = time.monotonic()
    run.plan()
    planned = time.monotonic() - began
    if plan:  # a fixed plan (n x MB per stage, the last repeated), re-planning off
        run.delta = float("inf")
        assert run.record.plan is not None
        stages = run.record.plan.stages
        for index, stage in enumerate(stages):
            n, memory = plan[min(index, len(plan) - 1)]
            stage.allocation = dataclasses.replace(stage.allocation, n=n, memory_mb=memory)
        estimates = stage_estimates(run.workload, run.plan_catalog, stages, run._probe_warm())
        for stage, (time_s, cost_usd) in zip(stages, estimates, strict=True):
            stage.time_s, stage.cost_usd = time_s, cost_usd
            stage.predicted = Estimate(time_s, cost_usd)
    state = record_to_json(run.execute())
    state["bench_plan_s"] = planned
    return state


def plain_loop(path: Path, trials: list[dict[str, Any]], one_thread: bool) -> tuple[float, int]:
    """The trials' epochs as a plain loop in this process; (wall seconds, epochs trained)."""
    import contextlib

    if not one_thread:
        return _plain_loop(path, trials)
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else 0
    with contextlib.ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=1))
        except ImportError:
            pass
        if torch is not None:
            torch.set_num_threads(1)
            stack.callback(torch.set_num_threads, threads)
        return _plain_loop(path, trials)


def _plain_loop(path: Path, trials: list[dict[str, Any]]) -> tuple[float, int]:
    import numpy as np

    from faasml.job import load_job
    from faasml.workloads import create_model, create_optimizer
    from faasml.workloads.data import iterate_minibatches

    job = load_job(path)
    train, test = load_data(job.dataset)
    began = time.monotonic()
    epochs_total = 0
    for trial in trials:
        spec = apply_config(job, trial["config"]) if trial["config"] else job
        model = create_model(
            spec.model.name, train.input_shape, train.num_classes, **dict(spec.model.options)
        )
        optimizer = create_optimizer(
            spec.optimizer.name, model.num_params, **dict(spec.optimizer.hyperparameters)
        )
        params = model.init_params(spec.seed)
        for epoch in range(len(trial["history"])):
            for _, x, y in iterate_minibatches(train, spec.batch_size, seed=spec.seed, epoch=epoch):
                _, grad = model.loss_and_grad(params, x, y)
                params = optimizer.step(params, np.asarray(grad, dtype=np.float32))
            model.evaluate(params, test.features, test.labels)
            epochs_total += 1
    return time.monotonic() - began, epochs_total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", nargs="*", help="job file stems to run (default: all)")
    parser.add_argument(
        "--epochs-per-stage", type=int, help="epochs per tuning stage (default: the job's)"
    )
    parser.add_argument(
        "--compare-segments",
        action="store_true",
        help="each job twice: segments as the coordinator chooses, and one epoch per segment",
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="where faasml's time went, under each job's line"
    )
    parser.add_argument(
        "--plan",
        help="a fixed plan, NxMB per stage (the last repeated), e.g. 1x1728,1x896,2x896; "
        "re-planning off",
    )
    parser.add_argument(
        "--no-prewarm",
        action="store_true",
        help="do not prewarm the next stage's functions (to compare, in separate processes)",
    )
    parser.add_argument(
        "--compare-prewarm",
        action="store_true",
        help="each job twice: the next stage prewarmed during the last wave (pre) and not "
        "(cold), alternately, with the same --plan",
    )
    parser.add_argument(
        "--one-thread-only",
        action="store_true",
        help="run only the one-thread plain loop (on a loaded machine the other took 15x longer)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(JOBS_DIR))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(JOBS_DIR), os.environ.get("PYTHONPATH", "")) if p
    )
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-overhead-"))
    kinds: list[tuple[str, int | None, bool]] = [("auto", None, not args.no_prewarm)]
    if args.compare_segments:
        kinds.append(("1-ep", 1, True))
    if args.compare_prewarm:
        if not args.plan:
            parser.error("--compare-prewarm needs --plan (both runs on the same plan)")
        kinds = [("pre", None, True), ("cold", None, False)]
    plan = None
    if args.plan:
        try:
            plan = [(int(n), int(m)) for n, m in (a.split("x") for a in args.plan.split(","))]
        except ValueError:
            parser.error(f"--plan {args.plan!r}: expected NxMB,... e.g. 1x1728,2x896")
    print(
        "faasml run: wall time of the run itself (record elapsed_s), profiling and planning "
        "EXCLUDED\n(shown apart); compute s: the run's training steps inside the functions "
        "(the slowest\nworker's, summed over epochs); plain loop: the same trials x epochs, "
        "one process,\nits thread pools as they come and at one thread (1-thr); ratio: "
        "faasml over the faster.\n"
    )
    print(
        f"{'job':<16} {'budget':>7} {'trials':>6} {'epochs':>6} {'allocations':<24} "
        f"{'profiling s':>11} {'faasml s':>9} {'compute s':>9} {'plain s':>8} {'1-thr s':>8} "
        f"{'ratio':>6}"
    )
    ratios = []
    for path, budget in JOBS:
        name = Path(path).stem
        if args.jobs and name not in args.jobs:
            continue
        job_path = _with_epochs(ROOT / path, args.epochs_per_stage, work)
        for kind, epochs_per_segment, prewarm in kinds:
            label = name if len(kinds) == 1 else f"{name} {kind}"
            ratios.append(
                _row(
                    label,
                    job_path,
                    budget,
                    work / label,
                    epochs_per_segment,
                    args.breakdown,
                    args.one_thread_only,
                    plan,
                    prewarm,
                )
            )
    missed = [f"{n} {r:.2f}x" for n, r in ratios if r > TARGET]
    print(
        f"\ntarget: faasml <= {TARGET}x the plain loop; "
        + ("met by every job" if not missed else "missed by " + ", ".join(missed))
    )


def _with_epochs(path: Path, epochs: int | None, work: Path) -> Path:
    """``path``, or a copy of it with ``tuning.epochs_per_stage`` set to ``epochs``."""
    if epochs is None:
        return path
    import yaml

    data = yaml.safe_load(path.read_text())
    data["tuning"]["epochs_per_stage"] = epochs
    data["name"] = f"{data['name']}-{epochs}ep"
    work.mkdir(parents=True, exist_ok=True)
    copy = work / f"{path.stem}-{epochs}ep.yaml"
    copy.write_text(yaml.safe_dump(data))
    return copy


def _row(
    name: str,
    path: Path,
    budget: float,
    folder: Path,
    epochs_per_segment: int | None,
    breakdown: bool = False,
    one_thread_only: bool = False,
    plan: list[tuple[int, int]] | None = None,
    prewarm: bool = True,
) -> tuple[str, float]:
    """Run one job with faasml and as plain loops; print its line; (name, ratio)."""
    state = faasml_run(path, budget, folder, epochs_per_segment, plan, prewarm)
    trials = [t for t in state["trials"] if t["history"]]
    single_s, epochs = plain_loop(path, trials, one_thread=True)
    plain_s = float("nan") if one_thread_only else plain_loop(path, trials, one_thread=False)[0]
    run_s = float(state["elapsed_s"])
    compute_s = sum(h["compute_s"] for t in trials for h in t["history"])
    allocations = sorted(
        {
            f"{s['allocation']['n']}x{s['allocation']['memory_mb']}"
            for s in state["plan"]["stages"]
            if "measured_time_s" in s
        }
    )
    ratio = run_s / (single_s if one_thread_only else min(plain_s, single_s))
    segments = int(state.get("segments", 0))
    print(
        f"{name:<16} {budget:>7g} {len(trials):>6} {epochs:>6} {','.join(allocations):<24} "
        f"{state['profile']['profiling_s']:>11.1f} {run_s:>9.2f} {compute_s:>9.2f} "
        f"{plain_s:>8.2f} {single_s:>8.2f} "
        f"{ratio:>5.2f}x  ({state['status']}, {segments} segments)",
        flush=True,
    )
    if breakdown:
        print(_breakdown(state), flush=True)
    return name, ratio


def _breakdown(state: dict[str, Any]) -> str:
    """Where the run's time went, from the record's ``timings`` (seconds)."""
    t = {key: float(value) for key, value in state.get("timings", {}).items()}
    segments = max(int(state.get("segments", 0)), 1)
    elapsed = float(state["elapsed_s"])
    get = t.get
    lines = [
        f"    run {elapsed:.2f} s: in stages {get('run_s', 0):.2f}, between stages "
        f"{elapsed - get('run_s', 0):.2f} (re-calibration, re-planning, record)",
        f"    segments (summed; side by side they overlap): {get('segments_s', 0):.2f} s, "
        f"{1000 * get('segments_s', 0) / segments:.1f} ms each",
    ]
    parts = [
        ("train_s", "training rounds"),
        ("load_s", "loading"),
        ("end_s", "eval+checkpoint"),
        ("invoke_s", "invocation"),
        ("cold_start_s", "cold starts"),
        ("notice_s", "dispatch+notice"),
    ]
    lines.append(
        "      "
        + ", ".join(f"{label} {1000 * get(key, 0) / segments:.1f}" for key, label in parts)
        + " ms/segment"
    )
    launch, commit, record = (
        1000 * get(k, 0) / segments for k in ("launch_s", "commit_s", "record_s")
    )
    lines.append(
        f"    coordinator: launch {launch:.1f}, commit {commit:.1f} (record {record:.1f})"
        " ms/segment"
    )
    details = [str(c.get("detail", "")) for c in state.get("charges", [])]
    prewarmed = sum(1 for d in details if d.startswith("prewarm"))
    lines.append(
        f"    functions started: {int(state.get('cold_starts', 0))}, {prewarmed} of them "
        f"prewarmed; cold starts waited for in segments {get('cold_start_s', 0):.2f} s"
    )
    for stage in state.get("plan", {}).get("stages", []):
        a = stage["allocation"]
        lines.append(
            f"    stage {stage['index']}: {a['n']}x{a['memory_mb']}, predicted "
            f"{float(stage.get('predicted_time_s', 0.0)):.1f} s, measured "
            f"{float(stage.get('measured_time_s', 0.0)):.1f} s"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
