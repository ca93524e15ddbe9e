"""A profile paid once, the whole command against a plain loop, and trials beside busy loops
(issue 34).

    .venv/bin/python benchmarks/bench_busy_platform.py [--quick] [--jobs NAME ...]

Job set: the tuning examples (examples/tune-*.yaml), the jobs of benchmarks/jobs (run with
``faasml tune JOB --budget B`` as a command) and the users' own loops of
benchmarks/jobs/own_loops.py (run with ``faasml.Tuner(...).fit()`` in this process, as
bench_loops.py does). Each job, with a profile cache of its own:

1. runs twice in a row under the budget, first with the cache empty, then with the profile the
   first run stored: profiling's bill and seconds of each run (target on the second: $0, 0 s);
2. the second run's whole command (fit, for a loop) against the same trials trained the same
   epochs as a plain loop at one thread in this process (bench_overhead.py's and
   bench_loops.py's plain loops): target <= 1.3x for a job whose plain loop takes under a
   minute, <= 1.1x above;
3. runs a third time beside two busy loops (``bash -c 'while :; do :; done'``, killed by PID
   when it ends): the trials lost (target 0).

``--quick``: tune-logreg and the MLP loop, tiny.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import faasml
from faasml.exceptions import TrialsLostError
from faasml.runtime.record.codec import record_from_json, record_to_json
from faasml.runtime.record.records import RunRecord
from faasml.runtime.runs.planning import profiling_s

ROOT = Path(__file__).resolve().parent.parent
JOBS_DIR = ROOT / "benchmarks" / "jobs"
BUSY = ["bash", "-c", "while :; do :; done"]
SHORT, LONG, MINUTE = 1.3, 1.1, 60.0  # the targets, and where a job is long

# (job file, budget USD): budgets as bench_runtime_model_error.py gives them.
FILE_JOBS: list[tuple[str, float]] = [
    ("examples/tune-logreg.yaml", 0.002),
    ("examples/tune-cnn.yaml", 0.005),
    ("examples/tune-digits.yaml", 0.01),
    ("benchmarks/jobs/tune-mlp.yaml", 0.03),
    ("benchmarks/jobs/tune-bn-cnn.yaml", 0.03),
    ("benchmarks/jobs/tune-transformer.yaml", 0.03),
]
LOOP_BUDGET = 0.05
# The plain loops of bench_loops.py and bench_overhead.py, imported by name: their own imports
# (own_loops from a path they add, an untyped threadpoolctl) stay outside this file's mypy.
LOOPS = importlib.import_module("bench_loops")
OVERHEAD = importlib.import_module("bench_overhead")


@dataclass(frozen=True)
class Ran:
    """One run of a job: its record, the whole command's seconds and (a loop) its results."""

    record: RunRecord
    wall_s: float
    grid: faasml.ResultGrid | None = None


@dataclass(frozen=True)
class Job:
    """A job of the set: its name, how to run it once into a folder, and its plain loop."""

    name: str
    budget: float
    run: Callable[[Path], Ran]
    plain: Callable[[Ran], tuple[float, int]]


def _command(path: str, budget: float, run_dir: Path) -> Ran:
    """``faasml tune`` as a command; its record (a run that lost trials exits non-zero)."""
    faasml_bin = Path(sys.executable).parent / "faasml"
    command = [str(faasml_bin), "tune", str(ROOT / path), "--budget", str(budget)]
    began = time.monotonic()
    done = subprocess.run(
        [*command, "--run-dir", str(run_dir)], capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - began
    record_file = run_dir / "record.json"
    if not record_file.exists():
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
        raise RuntimeError(f"exit {done.returncode}, no record: {' '.join(last)}")
    return Ran(record_from_json(json.loads(record_file.read_text(encoding="utf-8"))), wall)


def _fit(job: Any, quick: bool, run_dir: Path) -> Ran:
    """``faasml.Tuner(loop, ...).fit()`` in this process; a run that lost trials raises."""
    began = time.monotonic()
    try:
        grid = LOOPS.tuner(job, run_dir, quick, budget=LOOP_BUDGET).fit()
    except TrialsLostError as err:
        assert isinstance(err.results, faasml.ResultGrid)
        grid = err.results
    return Ran(grid.record, time.monotonic() - began, grid)


def _file_plain(path: str, ran: Ran) -> tuple[float, int]:
    plain: tuple[float, int] = OVERHEAD.plain_loop(
        ROOT / path, record_to_json(ran.record)["trials"], True
    )
    return plain


def _loop_plain(job: Any, ran: Ran) -> tuple[float, int]:
    assert ran.grid is not None
    return LOOPS.plain_seconds(job, ran.grid, 1), sum(r.epochs or 0 for r in ran.grid.results)


def job_set(quick: bool) -> list[Job]:
    files = FILE_JOBS[:1] if quick else FILE_JOBS
    jobs = [
        Job(Path(path).stem, budget, partial(_command, path, budget), partial(_file_plain, path))
        for path, budget in files
    ]
    jobs += [
        Job(loop.name, LOOP_BUDGET, partial(_fit, loop, quick), partial(_loop_plain, loop))
        for loop in LOOPS.job_set(quick)
    ]
    return jobs


def _profiling(label: str, ran: Ran, goal: str = "") -> str:
    record = ran.record
    usd = record.bill_usd() - record.run_usd()
    seconds = profiling_s(record.profile, record)
    cached = "cached" if record.profile_cached else "measured"
    return (
        f"  {label}: profiling ${usd:.6f} {seconds:.1f} s ({cached}){goal}, "
        f"command {ran.wall_s:.1f} s, {record.status}"
    )


def _lost(record: RunRecord) -> list[int]:
    return [t.trial_id for t in record.trials if t.status == "failed"]


def beside_busy_loops(job: Job, run_dir: Path) -> str:
    """The job run beside two busy loops, killed by PID whatever happens; its line."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        hogs = [subprocess.Popen(BUSY) for _ in range(2)]
        ran = job.run(run_dir)
        load = os.getloadavg()[0]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    lost = _lost(ran.record)
    return (
        f"  2 busy loops: {ran.record.status}, {len(lost)} of {len(ran.record.trials)} "
        f"trials lost {f'{lost} ' if lost else ''}[target 0], load {load:.1f} at the end"
    )


def measure(job: Job, work: Path) -> None:
    """The three measures of one job, a line each, as they come."""
    os.environ["FAASML_CACHE"] = str(work / "cache")  # empty: the first run measures the job
    print(f"{job.name} (budget ${job.budget:g})", flush=True)
    cold = job.run(work / "cold")
    print(_profiling("cold", cold), flush=True)
    warm = job.run(work / "warm")
    print(_profiling("warm", warm, " [target $0]"), flush=True)
    plain, epochs = job.plain(warm)
    goal = SHORT if plain < MINUTE else LONG
    ratio = warm.wall_s / plain if plain > 0 else float("nan")
    print(
        f"  plain loop (1 thread, {epochs} epochs) {plain:.1f} s: warm command {ratio:.2f}x "
        f"[target <= {goal}x]",
        flush=True,
    )
    print(beside_busy_loops(job, work / "busy"), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tune-logreg and the MLP loop")
    parser.add_argument("--jobs", nargs="+", metavar="NAME", help="run only these jobs")
    args = parser.parse_args()
    jobs = job_set(args.quick)
    unknown = sorted(set(args.jobs or []) - {j.name for j in jobs})
    if unknown:
        parser.error(f"--jobs {' '.join(unknown)}: one of {[j.name for j in jobs]}")
    # The BatchNorm CNN's factory is in benchmarks/jobs: importable by the functions too.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(JOBS_DIR), os.environ.get("PYTHONPATH", "")) if p
    )
    one, five, fifteen = os.getloadavg()
    print(f"load average at the start: {one:.1f} {five:.1f} {fifteen:.1f} ({os.cpu_count()} cores)")
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-busy-"))
    for job in jobs:
        if args.jobs and job.name not in args.jobs:
            continue
        try:
            measure(job, work / job.name)
        except Exception as err:  # an infeasible budget, a failed command: the next job
            print(f"  error: {type(err).__name__}: {err}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
