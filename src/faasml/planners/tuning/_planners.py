"""The tuning planners, each a pure function ``(TuningProblem) -> rows`` (one θ per stage).

``exact`` and ``greedy`` partition resources across stages (CE-scaling §III-C); the baselines
are the paper's (§IV-B): ``static-cheapest`` (the cost-optimal single allocation, LambdaML and
Siren as evaluated, and Algorithm 1's warm start), ``static`` (the best single allocation
within the constraint, a stronger baseline), ``fixed`` (the limit split equally among stages
and the trials of a stage), ``fixed-pool`` (the same pool of functions for every stage, split
equally among its trials: the paper's cluster-based method) and ``even-trials`` (split in
proportion to trial-epochs, what the paper says Siren's learned policy tends to do).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import InfeasibleConstraintError
from faasml.planners.tuning._exact import ExactSolution, exact_solution
from faasml.planners.tuning._greedy import greedy_options
from faasml.planners.tuning._problem import TuningProblem
from faasml.registry import Registry
from faasml.types import Objective
from faasml.units import format_duration, format_money

TuningPlanner = Callable[[TuningProblem], tuple[int, ...]]
"""A pure planner: the candidate-table row of every stage, or InfeasibleConstraintError."""

TUNING_PLANNERS: Registry[TuningPlanner] = Registry("tuning planner")

CertifyingPlanner = Callable[[TuningProblem], tuple[tuple[int, ...], ExactSolution]]
"""A planner that also proves how far from optimal its plan is at most."""
CERTIFYING_PLANNERS: dict[str, CertifyingPlanner] = {}
"""Planners (by their TUNING_PLANNERS name) that return a certificate with the plan."""


def _rows(problem: TuningProblem, options: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(s.rows[j]) for s, j in zip(problem.stages, options, strict=True))


def _static_rows(problem: TuningProblem) -> tuple[NDArray[np.int64], np.ndarray, np.ndarray]:
    """Rows whose static plan meets every bound, with the static plans' times and costs."""
    time, cost = problem.static_totals()
    ok = np.ones(time.shape, dtype=bool)
    c = problem.constraint
    if c.budget_usd is not None:
        ok &= cost <= c.budget_usd
    if c.deadline_s is not None:
        ok &= time <= c.deadline_s
    rows = np.flatnonzero(ok)
    if rows.size == 0:
        raise InfeasibleConstraintError(
            "no single allocation for every stage meets the constraint "
            "(a plan that changes the allocation between stages may)"
        )
    return rows, time, cost


def _pick(rows: NDArray[np.int64], primary: np.ndarray, secondary: np.ndarray) -> int:
    return int(rows[np.lexsort((secondary[rows], primary[rows]))[0]])


def static_cheapest_row(problem: TuningProblem) -> int:
    """The cost-optimal static allocation within the bounds (Algorithm 1's warm start)."""
    rows, time, cost = _static_rows(problem)
    return _pick(rows, cost, time)


def static_best_row(problem: TuningProblem) -> int:
    """The static allocation that is best in the objective within the bounds."""
    rows, time, cost = _static_rows(problem)
    if problem.constraint.goal is Objective.MIN_TIME:
        return _pick(rows, time, cost)
    return _pick(rows, cost, time)


@TUNING_PLANNERS.decorator("static-cheapest")
def static_cheapest(problem: TuningProblem) -> tuple[int, ...]:
    """The paper's static baseline: the cheapest single θ for every stage."""
    return (static_cheapest_row(problem),) * len(problem.stages)


@TUNING_PLANNERS.decorator("static")
def static(problem: TuningProblem) -> tuple[int, ...]:
    """The fastest (or, under a deadline, cheapest) single θ for every stage that fits."""
    return (static_best_row(problem),) * len(problem.stages)


def exact_certified(problem: TuningProblem) -> tuple[tuple[int, ...], ExactSolution]:
    """``exact``'s rows with its certificate (proven optimal, or the proven gap)."""
    solution = exact_solution(problem)
    return _rows(problem, solution.options), solution


CERTIFYING_PLANNERS["exact"] = exact_certified


@TUNING_PLANNERS.decorator("exact")
def exact(problem: TuningProblem) -> tuple[int, ...]:
    """The optimal partitioning (multiple-choice knapsack solved exactly, see ``_exact``)."""
    return exact_certified(problem)[0]


def _dominating_option(problem: TuningProblem, stage: int, row: int) -> int:
    """The stage option no worse than ``row`` in both time and cost (it exists: the options
    are the stage's Pareto front over all candidates)."""
    time, cost, _ = problem.stage_totals(stage, np.array([row]))
    options = problem.stages[stage]
    ok = np.flatnonzero(
        (options.time_s <= time[0] * (1 + 1e-12)) & (options.cost_usd <= cost[0] * (1 + 1e-12))
    )
    return int(ok[0])


def _warm_start(problem: TuningProblem, row: int) -> tuple[int, ...]:
    return tuple(_dominating_option(problem, i, row) for i in range(len(problem.stages)))


@TUNING_PLANNERS.decorator("greedy")
def greedy(problem: TuningProblem) -> tuple[int, ...]:
    """CE-scaling Algorithm 1, warm-started from the cost-optimal static plan as in the paper
    and, in addition, from the best static plan; the better result is returned, so it is never
    worse than either static baseline."""
    try:
        starts = [_warm_start(problem, static_cheapest_row(problem))]
        starts.append(_warm_start(problem, static_best_row(problem)))
    except InfeasibleConstraintError:
        # No static plan fits: start from the plan cheapest in the limited resource and let
        # the spending phase bring the other quantity within its bound, if it can.
        starts = [_cheapest_in_limit(problem)]
    minimise_time = problem.constraint.goal is Objective.MIN_TIME
    best: tuple[int, ...] | None = None
    best_key: tuple[float, float] = (np.inf, np.inf)
    for start in dict.fromkeys(starts):
        choice = greedy_options(problem, start)
        time, cost = problem.totals(choice)
        key = (time, cost) if minimise_time else (cost, time)
        if problem.constraint.admits(time, cost) and key < best_key:
            best, best_key = choice, key
    if best is None:
        raise InfeasibleConstraintError("greedy: found no plan within both bounds")
    return _rows(problem, best)


def _cheapest_in_limit(problem: TuningProblem) -> tuple[int, ...]:
    """Each stage on its option cheapest in the limited resource (budget, or deadline)."""
    minimise_time = problem.constraint.goal is Objective.MIN_TIME
    return tuple(int(np.argmin(s.cost_usd if minimise_time else s.time_s)) for s in problem.stages)


def _split(problem: TuningProblem, shares: np.ndarray, name: str) -> tuple[int, ...]:
    """Per stage, the best option within its share of the limit (budget, or deadline).

    The limit is the bound on what is not minimised: the budget when minimising time, the
    deadline when minimising cost. A constraint may give only the other bound (``--budget 5
    --minimise cost``: the cheapest plan, if it fits the budget); then nothing limits the
    spent resource, every stage's share is unbounded and each stage takes its best option.
    """
    minimise_time = problem.constraint.goal is Objective.MIN_TIME
    c = problem.constraint
    limit = c.budget_usd if minimise_time else c.deadline_s
    split = shares * (np.inf if limit is None else limit)
    choice = []
    for i, (stage, share) in enumerate(zip(problem.stages, split, strict=True)):
        spent, objective = (
            (stage.cost_usd, stage.time_s) if minimise_time else (stage.time_s, stage.cost_usd)
        )
        fits = np.flatnonzero(spent <= share)
        if fits.size == 0:
            shown = format_money if minimise_time else format_duration
            raise InfeasibleConstraintError(
                f"{name}: stage {i + 1}'s share {shown(share)} is below its least "
                f"{'cost' if minimise_time else 'time'} {shown(float(spent.min()))}"
            )
        choice.append(int(fits[np.argmin(objective[fits])]))
    time, cost = problem.totals(tuple(choice))
    if not c.admits(time, cost):
        raise InfeasibleConstraintError(f"{name}: the plan breaks the other bound")
    return _rows(problem, tuple(choice))


@TUNING_PLANNERS.decorator("fixed")
def fixed(problem: TuningProblem) -> tuple[int, ...]:
    """The cluster-style baseline: the limit split equally among stages (and so among the
    trials of a stage, which all get the same θ)."""
    d = len(problem.stages)
    return _split(problem, np.full(d, 1.0 / d), "fixed")


@TUNING_PLANNERS.decorator("even-trials")
def even_trials(problem: TuningProblem) -> tuple[int, ...]:
    """The Siren-like baseline: the limit split in proportion to each stage's trial-epochs
    q_i · r_i, so early stages, most of whose trials are stopped, get most of it."""
    work = np.array([s.trials * s.epochs for s in problem.stages], dtype=float)
    return _split(problem, work / work.sum(), "even-trials")


@TUNING_PLANNERS.decorator("fixed-pool")
def fixed_pool(problem: TuningProblem) -> tuple[int, ...]:
    """The paper's cluster-based Fixed: the same pool of N functions (one memory size and
    storage) for every stage, split equally among the stage's trials (``_pools``); the best
    such plan within the constraint."""
    if not problem.pool_plans:
        raise InfeasibleConstraintError("fixed-pool: no pool plan was evaluated for this job")
    plans = np.array(problem.pool_plans, dtype=np.int64)
    time = np.zeros(len(plans))
    cost = np.zeros(len(plans))
    for stage in range(len(problem.stages)):
        stage_time, stage_cost, _ = problem.stage_totals(stage, plans[:, stage])
        time += stage_time
        cost += stage_cost
    ok = np.ones(len(plans), dtype=bool)
    c = problem.constraint
    if c.budget_usd is not None:
        ok &= cost <= c.budget_usd
    if c.deadline_s is not None:
        ok &= time <= c.deadline_s
    rows = np.flatnonzero(ok)
    if rows.size == 0:
        raise InfeasibleConstraintError("fixed-pool: no equal split of a pool fits")
    primary, secondary = (time, cost) if c.goal is Objective.MIN_TIME else (cost, time)
    return tuple(int(r) for r in plans[_pick(rows, primary, secondary)])
