"""Workflows on the local platform, for real (SMLT Figs. 12–14): each example job run with its
deployment search re-triggered at every change (SMLT) and with the first choice kept for the
whole run (static: searched once, LambdaML-like), the same probe budget for the first search.

Prints per job and mode: wall time, the training bill, the search bill, mean throughput per
phase and the deployment of each phase. Measured on this machine, as it is loaded.

Run: .venv/bin/python benchmarks/bench_workflows.py [JOB.yaml ...] [--deadline 600 | --budget B]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from faasml.job import load_job
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.workflow import WorkflowRun
from faasml.types import Constraint
from faasml.units import format_money

EXAMPLES = ("train-dynamic-batching.yaml", "train-online.yaml", "train-nas.yaml")


def run(path: Path, retrigger: bool, constraint: Constraint, folder: Path) -> dict[str, object]:
    job = load_job(path)
    assert job.workflow is not None
    search = dataclasses.replace(job.workflow.search, retrigger=retrigger)
    job = dataclasses.replace(job, workflow=dataclasses.replace(job.workflow, search=search))
    flow = WorkflowRun(job, constraint, folder)
    flow.plan()
    began = time.monotonic()
    state = record_to_json(flow.execute())
    wall = time.monotonic() - began
    by_kind: dict[str, float] = {}
    for charge in state["charges"]:
        by_kind[charge["kind"]] = by_kind.get(charge["kind"], 0.0) + charge["usd"]
    search_usd = by_kind.get("search", 0.0)
    training = sum(v for k, v in by_kind.items() if k not in ("search", "profiling"))
    phases = []
    for p in state["workflow"]["phases"]:
        rates = [h["samples_per_s"] for h in p.get("epochs_run", []) if h.get("samples_per_s")]
        a = p["choice"]
        phases.append(f"{a['n']}×{a['memory_mb']}MB {sum(rates) / max(len(rates), 1):,.0f}/s")
    return {
        "status": state["status"],
        "wall": wall,
        "training": training,
        "search": search_usd,
        "phases": phases,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("jobs", nargs="*")
    parser.add_argument("--budget", type=float, help="least time within this many dollars")
    parser.add_argument(
        "--deadline", type=float, default=600.0, help="least cost within these seconds (default)"
    )
    args = parser.parse_args()
    constraint = (
        Constraint(budget_usd=args.budget)
        if args.budget is not None
        else Constraint(deadline_s=args.deadline)
    )
    print(f"constraint: {constraint}")
    root = Path(__file__).resolve().parent.parent / "examples"
    jobs = [Path(j) for j in args.jobs] or [root / name for name in EXAMPLES]
    print(f"{'job':<26} {'mode':<8} {'wall':>7} {'training':>10} {'search':>10}  phases")
    with tempfile.TemporaryDirectory(prefix="faasml-bench-") as tmp:
        for path in jobs:
            for retrigger in (True, False):
                mode = "smlt" if retrigger else "static"
                out = run(path, retrigger, constraint, Path(tmp) / f"{path.stem}-{mode}")
                print(
                    f"{path.stem:<26} {mode:<8} {out['wall']:>6.1f}s "
                    f"{format_money(float(out['training'])):>10} "
                    f"{format_money(float(out['search'])):>10}  "
                    f"{' | '.join(out['phases'])}  [{out['status']}]",  # type: ignore[arg-type]
                    flush=True,
                )


if __name__ == "__main__":
    main()
