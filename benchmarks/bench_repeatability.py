"""How well this machine repeats itself: the floor under any re-calibrated prediction (issue 11).

    PYTHONPATH=benchmarks/jobs .venv/bin/python benchmarks/bench_repeatability.py \
        [--job benchmarks/jobs/tune-bn-cnn.yaml] [--allocations 1x1728 2x1728 1x768] \
        [--trials 1] [--epochs 2] [--repeats 6]

Re-calibration predicts a stage from the stages before it on the same machine. Where the
machine does not deliver the same speed twice, no prediction from the past can be closer than
the machine's own repeatability. This measures it: the job is profiled (``TuneRun.measured``,
the profile cache as a run uses it), then for each allocation (functions × memory) the same
trials run ``--epochs`` warm epochs ``--repeats`` times in a row, each repeat a stage of its
own. Per allocation it prints each repeat's wall time, the model's prediction of such a stage
(``stage_estimate``, warm functions), and the *previous-repeat error* — |repeat i − repeat
i − 1| / repeat i, what a predictor that knew the last stage exactly would miss by — its
median and largest, beside the spread (largest over smallest) of the repeats.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

from faasml.job import load_job
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.runs.session import TuneRun
from faasml.runtime.runs.stage_pricing import stage_estimate
from faasml.sync.stores import open_store
from faasml.types import Allocation, Constraint

ROOT = Path(__file__).resolve().parent.parent


def measure(
    run: TuneRun, allocations: list[Allocation], trials: int, epochs: int, repeats: int, work: Path
) -> list[tuple[Allocation, float, list[float]]]:
    """(allocation, predicted stage s, measured wall s per repeat) for each allocation."""
    objects = open_store(f"embedded://{work / 'objects'}")
    rows = []
    with run.platform() as platform:
        coordinator = Coordinator(
            platform,
            run.catalog,
            run.meter,
            objects,
            f"embedded://{work / 'sync'}",
            run.recipe,
            namespace="rep",
        )
        coordinator.set_data(run.train, run.test)
        for index, allocation in enumerate(allocations):
            states = [TrialState(100 * index + i, {}) for i in range(trials)]
            coordinator.run(states, allocation, 1)  # the cold epoch: functions start
            walls = []
            for repeat in range(repeats):
                began = time.monotonic()
                coordinator.run(states, allocation, 1 + (repeat + 1) * epochs)
                walls.append(time.monotonic() - began)
            predicted, _ = stage_estimate(
                run.workload,
                run.plan_catalog,
                allocation,
                trials,
                epochs,
                warm=trials * allocation.n,
            )
            rows.append((allocation, predicted, walls))
            print(_line(allocation, predicted, walls), flush=True)
        coordinator.close()
    objects.close()
    return rows


def previous_errors(walls: list[float]) -> list[float]:
    """|w_i − w_{i−1}| / w_i for each repeat after the first."""
    return [abs(b - a) / b for a, b in itertools.pairwise(walls)]


def _line(allocation: Allocation, predicted: float, walls: list[float]) -> str:
    errors = previous_errors(walls)
    return (
        f"{allocation.n} x {allocation.memory_mb:>4} MB  model {predicted:6.2f} s  "
        f"repeats {' '.join(f'{w:.2f}' for w in walls)}\n"
        f"    previous-repeat error: median {statistics.median(errors):.1%}, "
        f"max {max(errors):.1%}; spread {max(walls) / min(walls):.2f}x; "
        f"model vs median repeat {predicted / statistics.median(walls) - 1:+.1%}"
    )


def _allocation(text: str) -> Allocation:
    try:
        n, memory = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"allocation {text!r}: give functions x memory MB, e.g. 2x1728") from None
    return Allocation(n, memory, "embedded")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", default=str(ROOT / "benchmarks/jobs/tune-bn-cnn.yaml"))
    parser.add_argument("--allocations", nargs="+", default=["1x1728", "2x1728", "1x768"])
    parser.add_argument("--trials", type=int, default=1, help="trials side by side per stage")
    parser.add_argument("--epochs", type=int, default=2, help="warm epochs per repeat")
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    if args.repeats < 3 or args.epochs < 1 or args.trials < 1:
        raise SystemExit("give --repeats >= 3, --epochs >= 1 and --trials >= 1")
    allocations = [_allocation(a) for a in args.allocations]
    work = Path(tempfile.mkdtemp(prefix="faasml-repeat-"))
    run = TuneRun(load_job(args.job), Constraint(budget_usd=1.0), work / "run")
    run.measured()
    print(
        f"job {run.job.name}: {args.trials} trial(s) x {args.epochs} warm epoch(s) per repeat, "
        f"{args.repeats} repeats; load {os.getloadavg()[0]:.1f} (1 min) before"
    )
    rows = measure(run, allocations, args.trials, args.epochs, args.repeats, work)
    errors = [e for _, _, walls in rows for e in previous_errors(walls)]
    print(
        f"\nall allocations: previous-repeat error median {statistics.median(errors):.1%}, "
        f"p90 {sorted(errors)[int(0.9 * (len(errors) - 1))]:.1%} over {len(errors)} pairs "
        f"(the re-calibration target is 5 %); load {os.getloadavg()[0]:.1f} (1 min) after"
    )


if __name__ == "__main__":
    main()
