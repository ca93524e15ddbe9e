"""Results invariant to the plan: one tuning job run with its plan forced to 1, 2 and 4
functions per trial (issue 30).

    .venv/bin/python benchmarks/bench_invariance.py [--job benchmarks/jobs/tune-mlp.yaml] \
        [--counts 1 2 4] [--samples 3000] [--trials 4] [--memory 512]

``batch_size`` is the global batch, so the same job, seed and budget must train every trial to
the same curve whatever n the planner gives it, and name the same best configuration. The job
is planned as ``faasml tune`` plans it (from its workload profile), then every stage's
allocation is set to n functions (re-planning off, so it stays there) and the run executes for
real: local worker processes, the embedded store. It prints the best configuration of each
run and the largest difference in validation loss (every trial, every epoch) against the
first count's run. Metrics, not time: the machine's load changes nothing printed.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path
from typing import Any

import faasml
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.types import Allocation

ROOT = Path(__file__).resolve().parent.parent


def forced_run(tuner: faasml.Tuner, n: int, memory_mb: int) -> dict[str, Any]:
    """The tuner's job with every stage on n functions of ``memory_mb``; its record."""
    run = TuneRun(tuner.job, tuner.constraint, tuner.run_dir, measure=False)
    run.delta = math.inf  # no re-planning: the stages stay on n
    run.plan()
    assert run.record.plan is not None
    for stage in run.record.plan.stages:
        stage.allocation = Allocation(n, memory_mb, "embedded", "allreduce")
    return record_to_json(run.execute())


def curves(record: dict[str, Any]) -> dict[tuple[int, int], float]:
    """(trial, epoch) -> validation loss."""
    return {
        (t["trial_id"], h["epoch"]): float(h["val_loss"])
        for t in record["trials"]
        for h in t["history"]
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", type=Path, default=ROOT / "benchmarks/jobs/tune-mlp.yaml")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--memory", type=int, default=512)
    parser.add_argument("--budget", type=float, default=1.0)
    args = parser.parse_args()
    settings = {
        "dataset.samples": args.samples,
        "tuning.trials": args.trials,
        "model.hidden": [64, 64],
    }
    records: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as work:
        for n in args.counts:
            tuner = faasml.Tuner(
                args.job, budget=args.budget, settings=settings, run_dir=Path(work) / f"n{n}"
            )
            records[n] = forced_run(tuner, n, args.memory)
    first = records[args.counts[0]]
    job = first["job"]
    print(
        f"job {job['name']}: {args.samples} samples, global batch {job['batch_size']}, "
        f"{args.trials} trials, seed {job['seed']}; stages forced to n functions of "
        f"{args.memory} MB"
    )
    print(f"{'n':>3}  {'trained on':<10} {'best':>4}  {'val_loss':>10}  configuration")
    base, worst = curves(first), 0.0
    same_best = True
    for n, record in records.items():
        best = record.get("best")
        if best is None:  # e.g. the platform refused n functions of that memory
            last = record["events"][-1]["text"] if record.get("events") else ""
            print(f"{n:>3}  run {record['status']}, no best trial: {last}")
            same_best = False
            continue
        trial = next(t for t in record["trials"] if t["trial_id"] == best["trial"])
        config = ", ".join(f"{k}={v:.4g}" for k, v in sorted(trial["config"].items()))
        used = sorted({h["n"] for t in record["trials"] for h in t["history"]})
        print(
            f"{n:>3}  {'/'.join(map(str, used)) + ' fn':<10} {best['trial']:>4}  "
            f"{trial['history'][-1]['val_loss']:>10.6f}  {config}"
        )
        same_best &= best["trial"] == first["best"]["trial"] and record["status"] == "finished"
        got = curves(record)
        if got.keys() != base.keys():
            print(f"    n={n} trained other (trial, epoch) pairs than n={args.counts[0]}")
            same_best = False
        for key in got.keys() & base.keys():
            worst = max(worst, abs(got[key] - base[key]))
    print(f"largest difference in validation loss (every trial, every epoch): {worst:.3g}")
    print(f"best configuration the same on every n: {'yes' if same_best else 'NO'}")
    return 0 if same_best else 1


if __name__ == "__main__":
    raise SystemExit(main())
