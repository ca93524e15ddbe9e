"""faasml's overhead: a real tuning run against the same training as a plain loop (MISSION C7).

    .venv/bin/python benchmarks/bench_overhead.py [--jobs tune-cnn tune-logreg]

For each job (examples/tune-cnn.yaml and examples/tune-logreg.yaml, seconds long; the MLP and
the transformer of benchmarks/jobs, whose epochs last seconds):

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
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# job file, budget (USD): generous, so the planner minimises the run's time.
JOBS: list[tuple[str, float]] = [
    ("examples/tune-cnn.yaml", 0.05),
    ("examples/tune-logreg.yaml", 0.05),
    # Jobs whose epochs last seconds, as a user's do (benchmarks/jobs).
    ("benchmarks/jobs/tune-mlp.yaml", 0.05),
    ("benchmarks/jobs/tune-transformer.yaml", 0.05),
]
TARGET = 1.2


def faasml_run(path: Path, budget: float, work: Path) -> dict[str, Any]:
    from faasml.config import load_job
    from faasml.runtime.session import TuneRun
    from faasml.types import Constraint

    os.environ["FAASML_CACHE"] = tempfile.mkdtemp(prefix="faasml-bench-cache-")
    run = TuneRun(load_job(path), Constraint(budget_usd=budget), work)
    began = time.monotonic()
    run.plan()
    planned = time.monotonic() - began
    state = run.execute()
    state["bench_plan_s"] = planned
    return state


def plain_loop(path: Path, trials: list[dict[str, Any]], one_thread: bool) -> tuple[float, int]:
    """The trials' epochs as a plain loop in this process; (wall seconds, epochs trained)."""
    import contextlib
    import sys

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

    from faasml.config import load_job
    from faasml.workloads import create_model, create_optimizer
    from faasml.workloads.data import iterate_minibatches

    job = load_job(path)
    train, test = job.dataset.load()
    began = time.monotonic()
    epochs_total = 0
    for trial in trials:
        spec = job.with_config(trial["config"]) if trial["config"] else job
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
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="faasml-bench-overhead-"))
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
        state = faasml_run(ROOT / path, budget, work / name)
        trials = [t for t in state["trials"] if t["history"]]
        plain_s, epochs = plain_loop(ROOT / path, trials, one_thread=False)
        single_s, _ = plain_loop(ROOT / path, trials, one_thread=True)
        run_s = float(state["elapsed_s"])
        compute_s = sum(h["compute_s"] for t in trials for h in t["history"])
        allocations = sorted(
            {
                f"{s['allocation']['n']}x{s['allocation']['memory_mb']}"
                for s in state["plan"]["stages"]
                if "measured_time_s" in s
            }
        )
        ratio = run_s / min(plain_s, single_s)
        ratios.append((name, ratio))
        print(
            f"{name:<16} {budget:>7g} {len(trials):>6} {epochs:>6} {','.join(allocations):<24} "
            f"{state['profile']['profiling_s']:>11.1f} {run_s:>9.2f} {compute_s:>9.2f} "
            f"{plain_s:>8.2f} {single_s:>8.2f} "
            f"{ratio:>5.2f}x  ({state['status']})",
            flush=True,
        )
    missed = [f"{n} {r:.2f}x" for n, r in ratios if r > TARGET]
    print(
        f"\ntarget: faasml <= {TARGET}x the plain loop; "
        + ("met by every job" if not missed else "missed by " + ", ".join(missed))
    )


if __name__ == "__main__":
    main()
