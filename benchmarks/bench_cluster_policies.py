"""Every cluster policy on the Pollux artifact's workloads (64 GPUs): JCT, queuing, goodput.

Prints, per job load (workloads-0.5, workloads, workloads-1.5), the mean over the eight
workloads of each policy's average JCT, p95 JCT, queuing time, goodput and utilisation; then
the fidelity check of our Pollux-like and Optimus policies against the published artifact
results (restart overhead 30 s as in the artifact's simulator), and FaPES against the oracle
Pollux-like policy and against ``pollux-learned`` (the Pollux users run). Every table is
printed at each restart cost of ``--restarts`` (FaPES Table 2's 5.68 s and the artifact's
30 s); the policies are told the restart cost they weigh.

    .venv/bin/python benchmarks/bench_cluster_policies.py [--loads 1.0] [--workloads 1,2] \
        [--policies fapes,pollux,pollux-learned] [--restarts 5.68,30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from faasml.cluster import (
    Cluster,
    SimConfig,
    load_models,
    load_workload,
    make_policy,
    resolve_workload,
    simulate,
)
from faasml.cluster.policies import GPU_POOL, POLICIES

DIRS = {"0.5": "workloads-0.5", "1.0": "workloads", "1.5": "workloads-1.5"}
PUBLISHED = {"pollux": 2751.0, "optimus": 5682.0, "tiresias": 4038.0}  # mean avg JCT, load 1.0


def run(args: argparse.Namespace) -> int:
    models = load_models()
    cluster = Cluster.uniform(16, 4)
    policies = args.policies.split(",")
    workloads = [int(w) for w in args.workloads.split(",")]
    means: dict[tuple[str, str], dict[str, float]] = {}
    if any(float(r) < 0 for r in args.restarts.split(",")):
        raise SystemExit("restart costs must be >= 0 seconds")
    for restart, load in (
        (float(r), load) for r in args.restarts.split(",") for load in args.loads.split(",")
    ):
        config = SimConfig(restart_s=restart)
        print(
            f"\n== job load {load} ({DIRS[load]}, {len(workloads)} workloads, 64 GPUs, "
            f"round 60 s, restart {restart:g} s)"
        )
        print(
            f"{'policy':14} {'avg JCT s':>10} {'p95 JCT s':>10} {'queue s':>9} "
            f"{'goodput':>10} {'speedup':>8} {'util':>6} {'restarts':>9} {'wall s':>7}"
        )
        for policy in policies:
            rows = []
            tic = time.perf_counter()
            for w in workloads:
                jobs = load_workload(resolve_workload(f"{DIRS[load]}/workload-{w}.csv"))
                policy_obj = make_policy(policy, 60.0, restart)
                rows.append(simulate(jobs, models, cluster, policy_obj, config).summary())
            wall = time.perf_counter() - tic
            m = {k: statistics.mean(r[k] for r in rows) for k in rows[0] if k != "deadline_met"}
            means[load, policy] = m
            means[f"{load}@{restart:g}", policy] = m
            print(
                f"{policy:14} {m['avg_jct_s']:10.0f} {m['p95_jct_s']:10.0f} "
                f"{m['avg_queue_s']:9.0f} {m['avg_goodput']:10.0f} {m['avg_speedup']:8.2f} "
                f"{100 * m['avg_utilization']:5.1f}% {m['restarts']:9.0f} {wall:7.1f}"
            )
        for other, label in (
            ("pollux", "Pollux-like (oracle)"),
            ("pollux-learned", "Pollux (learned)"),
        ):
            if "fapes" in policies and other in policies:
                fapes, base = means[load, "fapes"], means[load, other]
                print(
                    f"FaPES / {label}: mean avg JCT {fapes['avg_jct_s'] / base['avg_jct_s']:.3f} "
                    f"(target <= 0.75), p95 {fapes['p95_jct_s'] / base['p95_jct_s']:.3f}, "
                    f"queue {fapes['avg_queue_s'] / max(base['avg_queue_s'], 1e-9):.2f}x, "
                    f"restarts {fapes['restarts'] / max(base['restarts'], 1e-9):.2f}x"
                )
    if "1.0" in args.loads.split(",") and not args.no_fidelity:
        print("\n== fidelity: load 1.0, restart 30 s (the artifact's), mean avg JCT")
        config = SimConfig(restart_s=30.0)
        for policy in ("pollux", "optimus"):
            jcts = []
            for w in workloads:
                jobs = load_workload(resolve_workload(f"workloads/workload-{w}.csv"))
                res = simulate(jobs, models, cluster, make_policy(policy, 60.0, 30.0), config)
                jcts.append(res.summary()["avg_jct_s"])
            ours = statistics.mean(jcts)
            print(
                f"{policy:12} ours {ours:7.0f} s   published {PUBLISHED[policy]:7.0f} s   "
                f"ratio {ours / PUBLISHED[policy]:.3f}"
            )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="1.0,0.5,1.5", help="job loads among 0.5,1.0,1.5")
    parser.add_argument("--workloads", default="1,2,3,4,5,6,7,8")
    parser.add_argument("--policies", default=",".join(POLICIES.names(GPU_POOL)))
    parser.add_argument("--restarts", default="5.68,30", help="restart costs, seconds")
    parser.add_argument("--no-fidelity", action="store_true")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
