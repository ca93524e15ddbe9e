"""The job set as users' own training loops (issue 30): prediction, overhead, trials lost and
invariance to the plan.

    .venv/bin/python benchmarks/bench_loops.py [--quick] [--budget 0.05] [--counts 1 2 4]
        [--scale 4]

Three loops as users write them (benchmarks/jobs/own_loops.py, docs/your-own-loop.md), on
seeded synthetic data, each tuned by ``faasml.Tuner(...).fit()`` on the local platform within
the budget, with a fresh profile cache (the job is measured, as on a user's first run). Per
loop: the run's first prediction of its time (first stage to last) and bill (less profiling)
against the measured ones, the same for the stages re-predicted after re-calibration, the
overhead against the same loop function called in this process with a plain ``ctx`` for the
same trials and epochs (the faster of torch's threads as they come and one thread), and the
trials lost. Then one loop is run with its plan forced to each of ``--counts`` functions per
trial: the best configuration of each and the largest difference in validation metric.
``--quick``: the MLP alone, tiny. ``--scale``: the loops' rows times this (default 4, so that
each run takes tens of seconds and its figures measure the prediction more than the machine's
run-to-run noise; ``bench_busy_platform.py`` runs them at 1).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import faasml
from faasml.exceptions import TrialsLostError
from faasml.runtime.record.records import Estimate, RunRecord
from faasml.runtime.runs.session import TuneRun
from faasml.types import Allocation

sys.path.insert(0, str(Path(__file__).resolve().parent / "jobs"))
from own_loops import Loop, bn_cnn_loop, mlp_loop, transformer_loop

FIRST, RECALIBRATED, OVERHEAD = 0.10, 0.05, 1.1  # the targets


@dataclass(frozen=True)
class LoopJob:
    """One loop of the job set (its factory's name and docstring name it) and its tuning."""

    make: Callable[[int], Loop]
    rows: int
    space: dict[str, Any]
    metric: str
    batch: int
    trials: int

    @property
    def name(self) -> str:
        return "loop-" + self.make.__name__.removesuffix("_loop").replace("_", "-")


def _space(low: float, high: float, name: str, values: Any) -> dict[str, Any]:
    """A learning rate between low and high, and ``name`` among ``values`` (a list) or fixed."""
    other = {"choice": values} if isinstance(values, list) else values
    return {"lr": {"loguniform": [low, high]}, name: other}


def job_set(quick: bool, scale: int = 1) -> list[LoopJob]:
    """The three loops (quick: the MLP alone, tiny), with ``scale`` times their rows."""
    if quick:
        return [LoopJob(mlp_loop, 512, _space(1e-3, 3e-2, "width", 16), "val_rmse", 32, 2)]
    return [
        LoopJob(
            mlp_loop, 16384 * scale, _space(1e-3, 3e-2, "width", [64, 256]), "val_rmse", 128, 8
        ),
        LoopJob(bn_cnn_loop, 4096 * scale, _space(3e-3, 1e-1, "width", [8, 16]), "val_acc", 64, 8),
        LoopJob(
            transformer_loop, 8192 * scale, _space(3e-4, 3e-3, "layers", [1, 2]), "val_acc", 64, 4
        ),
    ]


def tuner(job: LoopJob, run_dir: Path, quick: bool, **bound: float) -> faasml.Tuner:
    """The job's Tuner (quick: two stages of one epoch, so that re-calibration runs)."""
    settings = {"name": job.name, "batch_size": job.batch, "seed": 0}
    config = faasml.TuneConfig(
        num_samples=job.trials,
        metric=job.metric,
        mode="min" if job.metric == "val_rmse" else "max",
        epochs_per_stage=1 if quick else 2,
        stages=2 if quick else None,
    )
    loop = job.make(job.rows)
    return faasml.Tuner(
        loop, job.space, tune_config=config, settings=settings, run_dir=run_dir, **bound
    )


class PlainCtx:
    """The trivial ctx of a plain loop in one process: no averaging, no checkpoint kept."""

    def __init__(self, epochs: int, max_epochs: int, batch: int) -> None:
        self.device, self.checkpoint, self.max_epochs = torch.device("cpu"), None, max_epochs
        self.epoch, self._epochs, self._batch = 0, epochs, batch

    def prepare(self, model: Any, opt: Any) -> tuple[Any, Any]:
        return model, opt

    def shard(self, data: Any) -> Any:
        return data

    def epochs(self) -> Iterator[int]:
        for epoch in range(self._epochs):
            self.epoch = epoch
            yield epoch

    def batches(self, data: tuple[torch.Tensor, torch.Tensor]) -> Iterator[Any]:
        order = torch.randperm(len(data[0]), generator=torch.Generator().manual_seed(self.epoch))
        for rows in torch.tensor_split(order, max(1, len(order) // self._batch)):
            yield data[0][rows], data[1][rows]

    def report(self, metrics: Any = None, checkpoint: Any = None) -> None:
        pass


def plain_seconds(job: LoopJob, grid: faasml.ResultGrid, threads: int) -> float:
    """The run's trials for the epochs each trained, as a plain loop in this process."""
    loop, before, plan = job.make(job.rows), torch.get_num_threads(), grid.record.plan
    max_epochs = sum(s.epochs for s in plan.stages) if plan else 1
    torch.set_num_threads(threads or before)
    began = time.monotonic()
    for result in grid.results:
        if result.epochs:
            torch.manual_seed(0)
            loop(dict(result.config), PlainCtx(result.epochs, max_epochs, job.batch))
    took = time.monotonic() - began
    torch.set_num_threads(before)
    return took


def _vs(what: str, time_s: tuple[float, float], usd: tuple[float, float], goal: float) -> str:
    """A line: predicted against measured time and bill, with the errors in % and the target."""
    errors = [abs(p - m) / m if m > 0 else math.nan for p, m in (time_s, usd)]
    return (
        f"  {what}: time {time_s[0]:.1f} s vs measured {time_s[1]:.1f} s ({errors[0]:.1%}), "
        f"bill ${usd[0]:.6f} vs ${usd[1]:.6f} ({errors[1]:.1%})  [target <= {goal:.0%}]"
    )


def prediction_lines(record: RunRecord) -> list[str]:
    """The first prediction, and the re-calibrated one where the record has it, vs measured."""
    plan = record.plan
    assert plan is not None
    first = plan.predicted or Estimate(plan.time_s, plan.cost_usd)
    lines = [
        _vs("first prediction", (first.time_s, record.elapsed_s),
            (first.cost_usd, record.run_usd()), FIRST)
    ]  # fmt: skip
    later = [(s.repredicted, s.measured) for s in plan.stages[1:] if s.repredicted and s.measured]
    if not later:
        return [*lines, "  after re-calibration: no stage re-predicted (one stage ran)"]
    again = [sum(getattr(p, k) for p, _ in later) for k in ("time_s", "cost_usd")]
    done = [sum(getattr(m, k) for _, m in later) for k in ("time_s", "cost_usd")]
    what = f"after re-calibration ({len(later)} later stage{'s' if len(later) > 1 else ''})"
    return [*lines, _vs(what, (again[0], done[0]), (again[1], done[1]), RECALIBRATED)]


PARTS = (
    ("cold_start_s", "cold starts"),
    ("load_s", "set-up before the first epoch"),
    ("train_s", "training and sync"),
    ("end_s", "the loop outside ctx.batches"),
    ("invoke_s", "invocation"),
    ("notice_s", "noticed"),
)


def parts_line(record: RunRecord) -> str:
    """Where the run's segments spent their time (each part summed over the segments, the
    slowest function of each), and the coordinator's commits (its record's writes included):
    what a prediction that misses has to hold."""
    timings = record.timings
    parts = [f"{what} {timings.get(key, 0.0):.1f} s" for key, what in PARTS]
    return (
        f"  measured parts ({record.segments} segments, {record.cold_starts} cold starts): "
        + ", ".join(parts)
        + f"; coordinator {timings.get('commit_s', 0.0):.1f} s"
    )


def run_job(job: LoopJob, work: Path, quick: bool, budget: float) -> None:
    began = time.monotonic()
    try:
        grid = tuner(job, work / job.name, quick, budget=budget).fit()
    except TrialsLostError as err:
        assert isinstance(err.results, faasml.ResultGrid)
        grid = err.results
    fit_s, record = time.monotonic() - began, grid.record
    best = record.best
    shown = (
        f"trial {best.trial}, {best.metric} {best.value:.4g}"
        if best and best.value is not None
        else "none"
    )
    print(
        f"{job.name} ({(job.make.__doc__ or '').rstrip('.')}): {job.rows} rows, "
        f"batch {job.batch}, {job.trials} trials, "
        f"budget ${budget}: {record.status}, best {shown}"
    )
    for line in prediction_lines(record):
        print(line)
    print(parts_line(record))
    plain = min(plain_seconds(job, grid, 0), plain_seconds(job, grid, 1))
    print(
        f"  overhead: faasml run {record.elapsed_s:.1f} s (fit {fit_s:.1f} s with profiling "
        f"and planning) vs plain loop {plain:.1f} s: {record.elapsed_s / plain:.2f}x  "
        f"[target <= {OVERHEAD}x]"
    )
    lost = [t.trial_id for t in record.trials if t.status == "failed"]
    print(f"  trials lost: {len(lost)} of {len(record.trials)} {lost or ''} [target 0]", flush=True)


def forced(job: LoopJob, n: int, work: Path, quick: bool) -> RunRecord:
    """``job`` with every stage on n functions of the largest of 1024, 896, 768, 640 or 512 MB
    whose n functions fit the platform's vCPUs at once, re-planning off; its record."""
    made = tuner(job, work / f"n{n}", quick, deadline=3600.0)  # a budget caps invocations
    run = TuneRun(made.job, made.constraint, made.run_dir, measure=False)
    run.delta = math.inf
    run.plan()
    assert run.record.plan is not None
    platform = run.catalog.platform
    cores = platform.capacity_vcpus or math.inf
    fits = [m for m in (1024, 896, 768, 640) if n * float(platform.vcpus(m)) <= cores]
    memory = fits[0] if fits else 512
    for stage in run.record.plan.stages:
        stage.allocation = Allocation(n, memory, "embedded", "allreduce")
    return run.execute()


def invariance(job: LoopJob, counts: list[int], work: Path, quick: bool) -> None:
    print(f"\ninvariance: {job.name}, global batch {job.batch}, plan forced to n functions")
    curves: dict[int, dict[tuple[int, int], float]] = {}
    for n in counts:
        record = forced(job, n, work, quick)
        curves[n] = {
            (t.trial_id, h["epoch"]): float(h["reported"][job.metric])
            for t in record.trials
            for h in t.history
        }
        best = record.best
        items = sorted(best.config.items()) if best else []
        config = ", ".join(f"{k.split('.')[-1]}={v:.4g}" for k, v in items)
        value = f"{best.metric} {best.value:.6f}" if best and best.value is not None else "none"
        used = sorted({(h["n"], h["memory_mb"]) for t in record.trials for h in t.history})
        ran = "/".join(f"{k} x {m} MB" for k, m in used)
        trial = best.trial if best else "-"
        print(f"  n={n} (trained on {ran}): {record.status}, best trial {trial}, {value}, {config}")
    base = curves[counts[0]]
    worst = max(
        (abs(c[k] - base[k]) for c in curves.values() for k in c.keys() & base.keys()),
        default=math.nan,
    )
    same = all(c.keys() == base.keys() for c in curves.values())
    print(
        f"  largest difference in {job.metric} (every trial, every epoch): {worst:.3g}"
        f"{'' if same else ' (the runs trained different trials or epochs)'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the MLP loop alone, tiny")
    parser.add_argument("--budget", type=float, default=0.05, help="USD per job (default 0.05)")
    parser.add_argument("--counts", type=int, nargs="+", help="default 1 2 4 (quick: 1 2)")
    parser.add_argument("--invariance-job", default="loop-mlp", help="default loop-mlp")
    parser.add_argument(
        "--scale", type=int, default=4, help="rows times this (default 4: runs of tens of seconds)"
    )
    args = parser.parse_args()
    if args.scale < 1:
        parser.error(f"--scale {args.scale}: must be a whole number of at least 1")
    jobs = job_set(args.quick, args.scale)
    chosen = [j for j in jobs if j.name == args.invariance_job]
    if not chosen:
        parser.error(f"--invariance-job {args.invariance_job!r}: one of {[j.name for j in jobs]}")
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-loops-"))
    os.environ["FAASML_CACHE"] = str(work / "cache")  # a fresh profile: the job is measured
    for job in jobs:
        run_job(job, work, args.quick, args.budget)
    invariance(chosen[0], args.counts or ([1, 2] if args.quick else [1, 2, 4]), work, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
