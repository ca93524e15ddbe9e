"""What any deployment search can reach where the search budget affords at most one probe.

The deployment-search benchmark's true jobs are drawn from a known distribution
(``sim.deployment.perturbed_workload``: computation ×0.6–1.6 with a memory tilt, model
×0.7–1.4). Where the search's dollar budget (5 % of the predicted bill) pays no probe, or one
probe at a cheap deployment far from the optimum, the best a search can do *on average* is
the Bayes rule under that distribution: the choice most often within 5 % of the optimum given
what it measured. This script estimates it by drawing true jobs, for one profile and both of
the benchmark's constraints:

- no probe: the one fixed choice most often good (in-sample: an estimate from above; chosen
  on half the draws and scored on the other half: one from below);
- one probe at each deployment whose probe fits the budget: a kernel rule (the choice most
  often good among the draws whose noisy measurement lies near this one, Gaussian weights of
  deviation ``--bandwidth`` in log time), in-sample (above) and cross-fitted (below).

A search that does not know the distribution cannot do better on average than these rates
(up to the estimates' error). Run:
.venv/bin/python benchmarks/bench_search_limits.py [--profile windsr-synthetic] [--draws 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from faasml.catalog import load_catalog
from faasml.search.deployment import SEARCH_SHARE, DeploymentGoal, DeploymentSpace
from faasml.sim.deployment import TrueLandscape, perturbed_workload
from faasml.workload import load_workload

sys.path.insert(0, str(Path(__file__).parent))
from bench_deployment_search import constraints, true_of


def kernel_rule(
    measured: np.ndarray, good: np.ndarray, train: slice, test: slice, bandwidth: float
) -> float:
    """Share of the ``test`` draws whose choice, the candidate most often good among the
    ``train`` draws weighted by how near their measurement is, is good."""
    hits = 0
    rows = np.arange(len(measured))[test]
    for j in rows:
        weight = np.exp(-0.5 * ((measured[train] - measured[j]) / bandwidth) ** 2)
        hits += bool(good[j, int(np.argmax(weight @ good[train]))])
    return hits / max(len(rows), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="windsr-synthetic")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--bandwidth", type=float, default=0.03)
    parser.add_argument("--noise", type=float, default=0.05)
    args = parser.parse_args()
    began = time.monotonic()
    catalog = load_catalog("aws-lambda").restricted_to(["s3"])
    nominal = load_workload(args.profile)
    space = DeploymentSpace.build(nominal, catalog)
    prices = space.probe_cost()
    half = args.draws // 2
    everything, first, second = slice(0, args.draws), slice(0, half), slice(half, None)
    print(
        f"{args.profile}: {args.draws} true jobs drawn (seed 12345), {len(space)} candidates, "
        f"noise {args.noise:.0%}; within 5 % judged as in bench_deployment_search"
    )
    print("rates: in-sample (from above) / cross-fitted (from below)")
    for which, constraint in enumerate(constraints(nominal, space)):
        goal = DeploymentGoal.from_constraint(constraint, nominal.epochs)
        cap = SEARCH_SHARE * space.predicted_bill(goal)
        probes = np.flatnonzero(prices <= cap)
        rng = np.random.default_rng(12345)
        good = np.zeros((args.draws, len(space)), dtype=bool)
        times = np.zeros((args.draws, len(probes)))
        for d in range(args.draws):
            truth = TrueLandscape(perturbed_workload(nominal, rng), catalog)
            exact = true_of(truth, space, goal)
            good[d] = exact.good(args.noise)
            times[d] = np.log(exact.time_s[probes])
        model = int(np.argmin(space.prior(goal)))
        counts = good.mean(axis=0)
        below = float(good[second, int(np.argmax(good[first].mean(axis=0)))].mean())
        kind = ("budget", "deadline")[which]
        print(f"\n{kind}: {len(probes)} deployments' probes fit the search budget")
        print(
            f"  no probe: best fixed choice {counts.max():.2f} / {below:.2f}; "
            f"the model's own choice {counts[model]:.2f}"
        )
        print(f"  cheapest probe {prices.min() / cap:.2f}x the search budget")
        for k, row in enumerate(probes):
            measured = times[:, k] + rng.normal(0.0, args.noise, args.draws)
            above = kernel_rule(measured, good, everything, everything, args.bandwidth)
            under = kernel_rule(measured, good, first, second, args.bandwidth)
            a = space.allocation(int(row))
            print(f"  one probe at {a.n} x {a.memory_mb} MB: {above:.2f} / {under:.2f}")
    print(f"\n({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
