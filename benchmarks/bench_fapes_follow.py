"""FaPES with and without ``follow_plans`` (plans follow the servers their jobs got), or
another of its on/off knobs (``--knob yield_planless``: running jobs without a plan yield
to queued jobs).

The second mend of FaPES's restart avoidance made every plan follow the servers its job
got (``follow_plan``), so that the swap is not redone every round. With a dedicated
partition at high inference load and 30 s restarts it raised mean average JCT by 4.1 %
over the code before the mends (benchmarks/results/fapes_loans.md). This runs FaPES with
the mend on and off
in one process, on the eight Pollux workloads, in the settings asked for:

- ``shared``: the whole 16 x 4 pool, no inference;
- ``dedicated:LEVEL`` / ``fapes:LEVEL`` / ``one-way:LEVEL``: the two tidal services of
  ``bench_fapes_loans.py`` at inference load LEVEL (low, medium, high), that loaning.

For each it prints per workload the mean JCT and queuing on and off, and, summed over the
workloads, the job-rounds in which a running job held GPUs without a plan (started by
back-filling when planning found it no plan within its horizon: such a job keeps its GPUs
until it ends, and the board shows it for two rounds only) and those in which a queued job
had no plan. ``--diff W`` prints the jobs of workload W whose JCT changed most.

    .venv/bin/python benchmarks/bench_fapes_follow.py [--settings shared,dedicated:high] \
        [--restarts 5.68,30] [--workloads 1,2] [--seed 7] [--diff 2] [--knob yield_planless]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Sequence

from bench_fapes_loans import LEVELS, services
from faasml.cluster import (
    Cluster,
    SimConfig,
    load_models,
    load_workload,
    resolve_workload,
    simulate,
)
from faasml.cluster.metrics import SimResult
from faasml.cluster.policies.fapes import FapesPolicy
from faasml.cluster.records import ClusterAllocation, Decision, JobView


class CountingFapes(FapesPolicy):
    """FaPES that counts, each round, running jobs without a plan and queued jobs left
    without one (read from what it is shown and what it decides: no change to it)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.counts: Counter[str] = Counter()

    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        decision = super().allocate(jobs, cluster, current, now)
        for view in jobs:
            if current.get(view.name):
                self.counts["running"] += 1
                self.counts["planless"] += view.plan is None
            else:
                self.counts["queued"] += 1
                self.counts["queued_unplanned"] += view.name not in decision.plans
        return decision


KNOBS = ("follow_plans", "yield_planless")


def _run(
    jobs: list[object], setting: str, restart: float, knob: str, on: bool, seed: int
) -> tuple[SimResult, Counter[str]]:
    loaning, _, level = setting.partition(":")
    svc = [] if loaning == "shared" else services(LEVELS[level], 64, seed)
    config = SimConfig(restart_s=restart, loaning="fapes" if loaning == "shared" else loaning)
    policy = CountingFapes(round_s=60.0, restart_s=restart, **{knob: on})
    result = simulate(jobs, MODELS, CLUSTER, policy, config, svc)  # type: ignore[arg-type]
    return result, policy.counts


MODELS = load_models()
CLUSTER = Cluster.uniform(16, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="shared,dedicated:high,fapes:high")
    parser.add_argument("--restarts", default="5.68,30")
    parser.add_argument("--workloads", default="1,2,3,4,5,6,7,8")
    parser.add_argument("--seed", type=int, default=7, help="the services' seed (default 7)")
    parser.add_argument("--diff", type=int, default=None, help="per-job changes of workload W")
    parser.add_argument("--knob", default="follow_plans", choices=KNOBS, help="what is on/off")
    parser.add_argument(
        "--on-only",
        action="store_true",
        help="run the knob on only (the off side is then printed as 'on' too: ignore it)",
    )
    args = parser.parse_args()
    workloads = [int(w) for w in args.workloads.split(",")]
    jobs = {w: load_workload(resolve_workload(f"workloads/workload-{w}.csv")) for w in workloads}
    for restart in (float(r) for r in args.restarts.split(",")):
        for setting in args.settings.split(","):
            if setting != "shared" and setting.partition(":")[2] not in LEVELS:
                raise SystemExit(f"--settings {setting!r}: shared or LOANING:LEVEL")
            print(f"\n== {setting}, restart {restart:g} s, services seed {args.seed}, {args.knob}")
            print(f"{'workload':8} {'JCT on':>8} {'JCT off':>8} {'on/off':>7} "
                  f"{'queue on':>9} {'queue off':>9} {'p95 on':>7} {'p95 off':>7} "
                  f"{'maxq on':>8} {'maxq off':>8}")  # fmt: skip
            ratios, on_jct, off_jct = [], [], []
            p95: dict[bool, list[float]] = {True: [], False: []}
            totals: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}
            results: dict[tuple[int, bool], SimResult] = {}
            for w in workloads:
                row = {}
                for follow in (True, False):
                    if follow or not args.on_only:
                        result, counts = _run(
                            jobs[w], setting, restart, args.knob, follow, args.seed
                        )
                    results[w, follow] = result
                    totals[follow].update(counts)
                    row[follow] = result.summary()
                on, off = row[True], row[False]
                on_jct.append(on["avg_jct_s"])
                off_jct.append(off["avg_jct_s"])
                ratios.append(on["avg_jct_s"] / off["avg_jct_s"])
                print(
                    f"{w:<8} {on['avg_jct_s']:8.0f} {off['avg_jct_s']:8.0f} {ratios[-1]:7.3f} "
                    f"{on['avg_queue_s']:9.0f} {off['avg_queue_s']:9.0f} "
                    f"{on['p95_jct_s']:7.0f} {off['p95_jct_s']:7.0f} "
                    f"{_max_queue(results[w, True]):8.0f} {_max_queue(results[w, False]):8.0f}"
                )
                p95[True].append(on["p95_jct_s"])
                p95[False].append(off["p95_jct_s"])
            mean_on, mean_off = statistics.mean(on_jct), statistics.mean(off_jct)
            print(
                f"{'mean':8} {mean_on:8.0f} {mean_off:8.0f} {mean_on / mean_off:7.3f}  "
                f"(on lower on {sum(r < 1 for r in ratios)} of {len(ratios)} workloads); "
                f"mean p95 JCT {statistics.mean(p95[True]):.0f} / "
                f"{statistics.mean(p95[False]):.0f}"
            )
            for follow in (True, False):
                c = totals[follow]
                print(
                    f"{args.knob} {'on ' if follow else 'off'}: running job-rounds "
                    f"{c['running']}, without a plan {c['planless']}; queued job-rounds "
                    f"{c['queued']}, left without a plan {c['queued_unplanned']}"
                )
            if args.diff in workloads:
                _diff(results[args.diff, True], results[args.diff, False], args.diff)
    return 0


def _max_queue(result: SimResult) -> float:
    """The longest any job of the run spent queued."""
    return max(j.queued_s for j in result.jobs)


def _diff(on: SimResult, off: SimResult, workload: int, top: int = 6) -> None:
    before = {j.name: j for j in off.jobs}
    rows = [(j, before[j.name]) for j in on.jobs if j.jct is not None]
    rows = [(a, b) for a, b in rows if b.jct is not None]
    rows.sort(key=lambda ab: (ab[0].jct or 0.0) - (ab[1].jct or 0.0))
    total = sum((a.jct or 0.0) - (b.jct or 0.0) for a, b in rows)
    print(f"workload {workload}: JCT on - off summed over {len(rows)} jobs {total:+.0f} s")
    print(f"{'job':16} {'JCT on':>8} {'JCT off':>8} {'queue on':>9} {'queue off':>9} restarts")
    for a, b in [*rows[-top:][::-1], *rows[:top]]:
        print(
            f"{a.name:16} {a.jct or 0:8.0f} {b.jct or 0:8.0f} {a.queued_s:9.0f} "
            f"{b.queued_s:9.0f} {a.restarts:4d}/{b.restarts}"
        )


if __name__ == "__main__":
    sys.exit(main())
