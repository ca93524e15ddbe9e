"""``plan_tuning``: evaluate Θ, prune it to the tuning candidates and run a planner by name."""

from __future__ import annotations

import time as _time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from faasml.catalog import Catalog
from faasml.exceptions import InfeasibleConstraintError
from faasml.planners._space import searchable_space
from faasml.planners.tuning._exact import exact_options
from faasml.planners.tuning._job import TuningJob
from faasml.planners.tuning._planners import CERTIFYING_PLANNERS, TUNING_PLANNERS
from faasml.planners.tuning._pools import pool_plans
from faasml.planners.tuning._problem import TuningProblem, build_problem
from faasml.types import Constraint, Objective, StagePlan, TunePlan
from faasml.units import format_duration, format_money
from faasml.workload import Workload


@dataclass(frozen=True)
class TuningSetup:
    """A problem ready for any planner, with where it came from and how long it took."""

    problem: TuningProblem
    workload: str
    catalog: str
    setup_s: float


def tuning_problem(
    workload: Workload,
    catalog: Catalog,
    constraint: Constraint,
    job: TuningJob,
    *,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
    warm: Mapping[int, int] | None = None,
) -> TuningSetup:
    """Θ evaluated and pruned to the stage options of ``job``; raises InfeasibleConstraintError
    with the least budget or deadline when no plan at all meets ``constraint``. ``warm``:
    functions warm before the first stage (memory MB -> instances), whose start it skips."""
    started = _time.perf_counter()
    space = searchable_space(
        workload, catalog, memory_step_mb=memory_step_mb, max_functions=max_functions
    )
    pools = pool_plans(
        workload, catalog, job, memory_step_mb=memory_step_mb, max_functions=max_functions
    )
    problem = build_problem(space, catalog, job, constraint, pools=pools, warm=warm)
    _check_feasible(problem, workload.name)
    return TuningSetup(problem, workload.name, catalog.name, _time.perf_counter() - started)


@dataclass(frozen=True)
class Optimality:
    """How close a plan is proven to be to the best plan over the stage options."""

    proven_optimal: bool
    gap: float
    """(objective − lower_bound) / objective: 0 when proven optimal."""
    lower_bound: float
    """No plan within the constraint has a smaller objective (time in s, or cost in $)."""
    method: str
    """How it was solved: 'dynamic programme', 'dynamic programme, merged states' (a
    proven gap) or 'HiGHS MILP'."""


@dataclass(frozen=True)
class TuningPlan(TunePlan):
    """A TunePlan with the planner's certificate: ``optimality`` is None for heuristics."""

    optimality: Optimality | None = None


def plan_from(setup: TuningSetup, planner: str = "exact") -> TuningPlan:
    """Run the planner named ``planner`` (see ``TUNING_PLANNERS``) on a prepared problem."""
    function = TUNING_PLANNERS.get(planner)
    certifying = CERTIFYING_PLANNERS.get(planner)
    optimality = None
    started = _time.perf_counter()
    if certifying is not None:
        rows, solution = certifying(setup.problem)
        optimality = Optimality(
            solution.proven_optimal, solution.gap, solution.lower_bound, solution.method
        )
    else:
        rows = function(setup.problem)
    elapsed = _time.perf_counter() - started
    return _tune_plan(setup, planner, rows, elapsed, optimality)


def plan_tuning(
    workload: Workload,
    catalog: Catalog,
    constraint: Constraint,
    sha: TuningJob,
    planner: str = "exact",
    *,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
    warm: Mapping[int, int] | None = None,
) -> TuningPlan:
    """One allocation per stage of ``sha`` minimising time within a budget, or cost within a
    deadline (CE-scaling eqs. 7–12), by the planner named ``planner``: exact, greedy, static,
    static-cheapest, fixed or even-trials. ``warm``: functions warm before the first stage
    (memory MB -> instances: the probe's, or the stages run before a re-plan)."""
    TUNING_PLANNERS.get(planner)  # an unknown name fails before any work
    setup = tuning_problem(
        workload,
        catalog,
        constraint,
        sha,
        memory_step_mb=memory_step_mb,
        max_functions=max_functions,
        warm=warm,
    )
    return plan_from(setup, planner)


def _tune_plan(
    setup: TuningSetup,
    planner: str,
    rows: tuple[int, ...],
    elapsed: float,
    optimality: Optimality | None,
) -> TuningPlan:
    problem = setup.problem
    stages = []
    for index, row in enumerate(rows):
        time, cost, waves = problem.stage_totals(index, np.array([row]))
        stage = problem.stages[index]
        stages.append(
            StagePlan(
                index=index + 1,
                trials=stage.trials,
                epochs=stage.epochs,
                allocation=problem.table.allocation(row),
                epoch=problem.table.breakdown(row),
                waves=int(waves[0]),
                time_s=float(time[0]),
                cost_usd=float(cost[0]),
            )
        )
    total_time = sum(s.time_s for s in stages)
    total_cost = sum(s.cost_usd for s in stages)
    if not problem.constraint.admits(total_time, total_cost):
        raise InfeasibleConstraintError(  # a planner bug, never a user error
            f"planner {planner} returned a plan outside the constraint"
        )
    return TuningPlan(
        planner=planner,
        constraint=problem.constraint,
        stages=tuple(stages),
        time_s=total_time,
        cost_usd=total_cost,
        planning_s=elapsed,
        setup_s=setup.setup_s,
        workload=setup.workload,
        catalog=setup.catalog,
        candidates=len(problem.table),
        optimality=optimality,
    )


def _check_feasible(problem: TuningProblem, workload: str) -> None:
    """Stages are independent but for the sums, so Σ min C_i is the least budget and Σ min T_i
    the least deadline; with both bounds the exact solver decides."""
    c = problem.constraint
    least_cost = float(sum(s.cost_usd.min() for s in problem.stages))
    least_time = float(sum(s.time_s.min() for s in problem.stages))
    what = f"no plan tunes {workload} over {len(problem.stages)} stages"
    if c.budget_usd is not None and least_cost > c.budget_usd:
        raise InfeasibleConstraintError(
            f"{what} within a budget of {format_money(c.budget_usd)}; "
            f"the least budget that works is {format_money(least_cost)}",
            least_budget_usd=least_cost,
        )
    if c.deadline_s is not None and least_time > c.deadline_s:
        raise InfeasibleConstraintError(
            f"{what} within a deadline of {format_duration(c.deadline_s)}; "
            f"the shortest deadline that works is {format_duration(least_time)}",
            least_deadline_s=least_time,
        )
    if c.budget_usd is not None and c.deadline_s is not None:
        try:
            exact_options(problem)
        except InfeasibleConstraintError:
            cheapest = Constraint(deadline_s=c.deadline_s, objective=Objective.MIN_COST)
            fastest = Constraint(budget_usd=c.budget_usd, objective=Objective.MIN_TIME)
            budget = problem.totals(exact_options(_with(problem, cheapest)))[1]
            deadline = problem.totals(exact_options(_with(problem, fastest)))[0]
            raise InfeasibleConstraintError(
                f"{what} within both {format_money(c.budget_usd)} and "
                f"{format_duration(c.deadline_s)}: meeting the deadline needs at least "
                f"{format_money(budget)}, and within the budget the shortest run takes "
                f"{format_duration(deadline)}",
                least_budget_usd=budget,
                least_deadline_s=deadline,
            ) from None


def _with(problem: TuningProblem, constraint: Constraint) -> TuningProblem:
    return replace(problem, constraint=constraint)


def retarget(setup: TuningSetup, constraint: Constraint) -> TuningSetup:
    """The same job and candidates under another constraint (stage options do not depend on
    it), checked for feasibility; cheap, so sweeps over budgets reuse one evaluation of Θ."""
    problem = _with(setup.problem, constraint)
    _check_feasible(problem, setup.workload)
    return TuningSetup(problem, setup.workload, setup.catalog, setup.setup_s)
