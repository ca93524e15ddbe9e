"""Tuning planners at the paper's scale: plan quality against the baselines, and planning time.

For every shipped Table IV workload of CE-scaling (§IV-B: 16384 trials, η = 2, 14 stages,
2 epochs per stage) on the aws-lambda catalog, at three budgets (1.1×, 1.5× and 3× the least
budget that can run the job) and three deadlines (1×, 1.5× and 3× the time of the fastest
static plan), it prints the time (budget rows) or cost (deadline rows) of every planner, the
reductions of `exact` and `greedy` against `static`, `static-cheapest` (the paper's baseline)
and `fixed`, and each planner's wall time. Then Hyperband (every bracket of R = 81 epochs,
η = 3, 15 stages) for two workloads under budgets and deadlines: the exact planner's time,
peak memory of the process and whether its plan is proven optimal (issue 12: this ran out of
memory under deadlines). Run: python benchmarks/bench_tuning_planners.py [--hyperband-only]
"""

from __future__ import annotations

import resource
import statistics
import sys
import time

from faasml.catalog import load_catalog
from faasml.exceptions import InfeasibleConstraintError
from faasml.planners.tuning import (
    SuccessiveHalving,
    TuningPlan,
    TuningSetup,
    concatenate,
    hyperband,
    plan_from,
    retarget,
)
from faasml.planners.tuning import tuning_problem as make_problem
from faasml.planners.tuning._exact import exact_options_milp
from faasml.types import Constraint, Objective, TunePlan
from faasml.units import format_duration, format_money
from faasml.workload import load_workload

WORKLOADS = (
    "lr-higgs",
    "svm-higgs",
    "lr-yfcc",
    "svm-yfcc",
    "mobilenet-cifar10",
    "resnet50-cifar10",
    "bert-imdb",
)
PLANNERS = ("exact", "greedy", "static", "static-cheapest", "fixed", "fixed-pool", "even-trials")
FACTORS = (1.1, 1.5, 3.0)
"""Budgets as multiples of the least budget that can run the job at all (Σ_i min C_i)."""
DEADLINE_FACTORS = (1.0, 1.5, 3.0)
"""Deadlines as multiples of the fastest static plan's time (so the static baselines exist)."""


def objective(plan: TunePlan) -> float:
    return plan.time_s if plan.constraint.goal is Objective.MIN_TIME else plan.cost_usd


def cut(plan: TunePlan | None, baseline: TunePlan | None) -> str:
    if plan is None or baseline is None:
        return "–"
    return f"{1 - objective(plan) / objective(baseline):.1%}"


def cell(plan: TunePlan | None) -> str:
    """Time and cost, the minimised one in bold."""
    if plan is None:
        return "no plan"
    time_text, cost_text = format_duration(plan.time_s), format_money(plan.cost_usd)
    if plan.constraint.goal is Objective.MIN_TIME:
        return f"**{time_text}** {cost_text}"
    return f"{time_text} **{cost_text}**"


HYPERBAND_WORKLOADS = ("mobilenet-cifar10", "lr-higgs")
HYPERBAND_FACTORS = (1.1, 1.5, 3.0)
"""Budgets (deadlines) as multiples of the least budget (shortest deadline) of the job."""
REPRODUCER_DEADLINE_S = 8559.0
"""Issue 12's deadline for mobilenet-cifar10 (an OOM before the state cap)."""


def optimality(plan: TunePlan) -> str:
    found = plan.optimality if isinstance(plan, TuningPlan) else None
    if found is None:
        return "–"
    return "proven" if found.proven_optimal else f"gap {found.gap:.1e} ({found.method})"


def hyperband_section(repeats: int = 3) -> None:
    """Exact planning time (best of ``repeats``) on Hyperband's 15 stages."""
    catalog = load_catalog("aws-lambda")
    job = concatenate(hyperband(81, 3))
    print("\nExact planner on Hyperband (R = 81, η = 3: 15 stages), best of 3 runs:\n")
    print("| workload | limit | exact planning | objective | optimality | greedy planning |")
    print("|---|---|---|---|---|---|")
    for name in HYPERBAND_WORKLOADS:
        base = make_problem(load_workload(name), catalog, Constraint(budget_usd=1e15), job)
        least_cost = sum(float(s.cost_usd.min()) for s in base.problem.stages)
        least_time = sum(float(s.time_s.min()) for s in base.problem.stages)
        limits = [Constraint(budget_usd=f * least_cost) for f in HYPERBAND_FACTORS]
        limits += [Constraint(deadline_s=f * least_time) for f in HYPERBAND_FACTORS]
        if name == "mobilenet-cifar10":
            limits.append(Constraint(deadline_s=REPRODUCER_DEADLINE_S))
        for constraint in limits:
            setup = retarget(base, constraint)
            runs = [plan_from(setup, "exact") for _ in range(repeats)]
            plan = min(runs, key=lambda p: p.planning_s)
            greedy = plan_from(setup, "greedy")
            limit = (
                f"budget {format_money(constraint.budget_usd)}"
                if constraint.budget_usd is not None
                else f"deadline {format_duration(constraint.deadline_s or 0)}"
            )
            print(
                f"| {name} | {limit} | {plan.planning_s * 1000:.0f} ms | {cell(plan)} | "
                f"{optimality(plan)} | {greedy.planning_s * 1000:.0f} ms |"
            )
            sys.stdout.flush()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nPeak resident memory of the benchmark process: {peak:.0f} MiB.")


def main() -> int:
    if "--hyperband-only" in sys.argv[1:]:
        hyperband_section()
        return 0
    catalog = load_catalog("aws-lambda")
    sha = SuccessiveHalving(16384, reduction_factor=2, stages=14, epochs_per_stage=2)
    header = (
        "| workload | limit | " + " | ".join(PLANNERS) + " | exact vs static | "
        "exact vs static-cheapest | exact vs fixed-pool | greedy vs static | "
        "greedy vs static-cheapest |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    walls: dict[str, list[float]] = {name: [] for name in PLANNERS}
    per_workload: dict[str, dict[str, list[float]]] = {}
    setups: list[tuple[str, float, float]] = []
    best: dict[str, float] = {"time-static-cheapest": 0, "time-static": 0, "cost-static": 0}
    milp: list[tuple[str, float, float, str]] = []
    for name in WORKLOADS:
        started = time.perf_counter()
        base = make_problem(load_workload(name), catalog, Constraint(budget_usd=1e15), sha)
        setups.append((name, time.perf_counter() - started, len(base.problem.table)))
        least_cost = sum(float(s.cost_usd.min()) for s in base.problem.stages)
        static_times, _ = base.problem.static_totals()
        fastest_static = float(static_times.min())
        limits = [Constraint(budget_usd=f * least_cost) for f in FACTORS]
        limits += [Constraint(deadline_s=f * fastest_static) for f in DEADLINE_FACTORS]
        per_workload[name] = {planner: [] for planner in PLANNERS}
        for constraint in limits:
            setup = retarget(base, constraint)
            plans: dict[str, TunePlan | None] = {}
            for planner in PLANNERS:
                try:
                    found = plan_from(setup, planner)
                    plans[planner] = found
                    walls[planner].append(found.planning_s)
                    per_workload[name][planner].append(found.planning_s)
                except InfeasibleConstraintError:
                    plans[planner] = None
            by_budget = constraint.budget_usd is not None
            limit = (
                format_money(constraint.budget_usd)
                if constraint.budget_usd is not None
                else format_duration(constraint.deadline_s or 0)
            )
            exact, greedy = plans["exact"], plans["greedy"]
            print(
                f"| {name} | {'budget' if by_budget else 'deadline'} {limit} | "
                + " | ".join(cell(plans[p]) for p in PLANNERS)
                + f" | {cut(exact, plans['static'])} | {cut(exact, plans['static-cheapest'])}"
                f" | {cut(exact, plans['fixed-pool'])} | {cut(greedy, plans['static'])}"
                f" | {cut(greedy, plans['static-cheapest'])} |"
            )
            _record(best, exact, plans, by_budget)
            if constraint is limits[1]:
                milp.append((name, *_milp_time(setup)))
        sys.stdout.flush()
    print("\nPlanning wall time per planner over all 42 instances (candidates given):\n")
    print("| planner | mean | max |")
    print("|---|---|---|")
    for planner, values in walls.items():
        if values:
            print(
                f"| {planner} | {statistics.mean(values) * 1000:.1f} ms | "
                f"{max(values) * 1000:.1f} ms |"
            )
    fast = sum(1 for value in walls["exact"] if value < 0.1)
    print(f"\nexact planned {fast} of {len(walls['exact'])} instances in under 0.1 s.")
    print("\nMean planning wall time per workload (ms, over its six instances):\n")
    print("| workload | " + " | ".join(PLANNERS) + " |")
    print("|---|" + "---|" * len(PLANNERS))
    for name, values in per_workload.items():
        print(
            f"| {name} | "
            + " | ".join(
                f"{statistics.mean(v) * 1000:.1f}" if v else "–"
                for v in (values[p] for p in PLANNERS)
            )
            + " |"
        )
    print("\nEvaluating Θ and pruning it to the tuning candidates (once per workload):\n")
    print("| workload | set-up | candidates |")
    print("|---|---|---|")
    for name, seconds, count in setups:
        print(f"| {name} | {seconds:.2f} s | {count:,.0f} |")
    print("\nExact dynamic programme against HiGHS MILP (budget 1.5× least):\n")
    print("| workload | DP | MILP | same optimum? |")
    print("|---|---|---|---|")
    for name, dp, mip, same in milp:
        print(f"| {name} | {dp * 1000:.1f} ms | {mip * 1000:.0f} ms | {same} |")
    print(
        f"\nLargest reductions by exact: time at equal budget "
        f"{best['time-static-cheapest']:.1%} against static-cheapest and "
        f"{best['time-static']:.1%} against static; cost at equal deadline "
        f"{best['cost-static']:.1%} against static (= static-cheapest under a deadline)."
    )
    hyperband_section()
    return 0


def _record(
    best: dict[str, float],
    exact: TunePlan | None,
    plans: dict[str, TunePlan | None],
    by_budget: bool,
) -> None:
    if exact is None:
        return
    for baseline in ("static", "static-cheapest"):
        other = plans[baseline]
        if other is None:
            continue
        value = 1 - objective(exact) / objective(other)
        key = f"time-{baseline}" if by_budget else "cost-static"
        if by_budget or baseline == "static":
            best[key] = max(best[key], value)


def _milp_time(setup: TuningSetup) -> tuple[float, float, str]:
    started = time.perf_counter()
    plan = plan_from(setup, "exact")
    dp = time.perf_counter() - started
    started = time.perf_counter()
    choice = exact_options_milp(setup.problem)
    mip = time.perf_counter() - started
    mip_time = setup.problem.totals(choice)[0]
    if abs(plan.time_s - mip_time) <= 1e-7 * mip_time:
        same = "yes"
    elif plan.time_s < mip_time:  # HiGHS stops within its feasibility and gap tolerances
        same = f"DP better by {mip_time - plan.time_s:.1f} s"
    else:
        same = f"MILP better by {plan.time_s - mip_time:.1f} s"
    return dp, mip, same


if __name__ == "__main__":
    sys.exit(main())
