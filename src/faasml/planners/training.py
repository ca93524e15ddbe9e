"""Static allocation for training a fixed number of epochs (CE-scaling eqs. 13–16)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog, FunctionPlatform
from faasml.exceptions import ConfigError, InfeasibleConstraintError
from faasml.models.space import AllocationTable
from faasml.planners._space import searchable_space
from faasml.planners.pareto import pareto_indices
from faasml.types import Breakdown, Constraint, Objective, TrainPlan
from faasml.units import format_duration, format_money
from faasml.workload import Workload


def run_totals(
    table: AllocationTable, epochs: int, platform: FunctionPlatform | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Time and cost of ``epochs`` epochs on each row, cold start included: T = s(θ) + e·t'(θ),
    C = startup(θ) + e·c'(θ) (CE-scaling eqs. 13 and 15). On a bounded, shared ``platform``
    the n functions run κ = ``platform.contention(n · vCPUs(m))`` times slower (the vCPUs its
    machine delivers, measured, are an input): start and epochs take κ times as long and the
    functions' part of the bill κ times as much."""
    if platform is None:
        slow: NDArray[np.float64] = np.ones(len(table))
    else:
        slow = platform.contentions(table.n * platform.vcpus(table.memory_mb))
    if not (slow > 1.0).any():
        return table.startup_s + epochs * table.time_s, table.startup_usd + epochs * table.cost_usd
    time = slow * (table.startup_s + epochs * table.time_s)
    rest = table.invocation_usd + table.storage_usd
    cost = slow * table.startup_usd + epochs * (slow * table.function_usd + rest)
    return time, cost


def plan_training(
    workload: Workload,
    catalog: Catalog,
    constraint: Constraint,
    *,
    epochs: int | None = None,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
    runners_up: int = 5,
) -> TrainPlan:
    """The Pareto-optimal static allocation that trains ``epochs`` epochs within the constraint.

    Minimises time within a budget (eqs. 13–14) or cost within a deadline (eqs. 15–16); with
    both bounds, ``constraint.objective`` says which. Raises InfeasibleConstraintError naming
    the least budget or deadline that would work.
    """
    count = workload.epochs if epochs is None else epochs
    if count < 1:
        raise ConfigError(f"the value of epochs is {count}, but must be epochs >= 1")
    space = searchable_space(
        workload, catalog, memory_step_mb=memory_step_mb, max_functions=max_functions
    )
    all_time, all_cost = run_totals(space, count, catalog.platform)
    admitted = _admitted(constraint, all_time, all_cost)
    front_rows = pareto_indices(all_time, all_cost)
    if not admitted.any():
        raise _infeasible(workload, count, constraint, all_time[front_rows], all_cost[front_rows])
    primary, secondary = (
        (all_time, all_cost) if constraint.goal is Objective.MIN_TIME else (all_cost, all_time)
    )
    # The best admitted allocation of each storage and scheme: the first is the plan, the
    # others its runners-up, so the user sees what each storage would give (Finding 3).
    per_option = []
    for option in range(len(space.options)):
        rows = np.flatnonzero(admitted & (space.option == option))
        if rows.size:
            per_option.append(int(rows[np.lexsort((secondary[rows], primary[rows]))[0]]))
    per_option.sort(key=lambda row: (primary[row], secondary[row]))
    best = per_option[0]
    epoch = space.breakdown(best)
    startup = Breakdown(
        load_s=0.0,
        compute_s=0.0,
        sync_s=0.0,
        invoke_s=float(space.startup_s[best]),
        function_usd=float(space.startup_usd[best]),
        invocation_usd=0.0,
        storage_usd=0.0,
    )
    total = epoch.scaled(count).plus(startup)
    platform = catalog.platform
    slow = platform.contention(float(space.n[best] * platform.vcpus(space.memory_mb[best])))
    if slow > 1.0:  # as run_totals prices it: the functions' time and bill, slowed
        total = replace(
            total,
            load_s=total.load_s * slow,
            compute_s=total.compute_s * slow,
            sync_s=total.sync_s * slow,
            invoke_s=total.invoke_s * slow,
            function_usd=total.function_usd * slow,
        )
    return TrainPlan(
        workload=workload.name,
        catalog=catalog.name,
        constraint=constraint,
        epochs=count,
        choice=space.estimate(best),
        total=total,
        startup_s=float(space.startup_s[best]),
        runners_up=tuple(space.estimate(row) for row in per_option[1 : 1 + runners_up]),
        frontier_size=len(front_rows),
        space_size=len(space),
    )


def _infeasible(
    workload: Workload,
    epochs: int,
    constraint: Constraint,
    time: NDArray[np.float64],
    cost: NDArray[np.float64],
) -> InfeasibleConstraintError:
    what = f"no allocation trains {workload.name} for {epochs} epochs"
    budget, deadline = constraint.budget_usd, constraint.deadline_s
    least_budget = float(cost.min())
    least_deadline = float(time.min())
    if budget is not None and deadline is not None:
        if budget < least_budget:
            message = f"{what} within a budget of {format_money(budget)}"
        elif deadline < least_deadline:
            message = f"{what} within a deadline of {format_duration(deadline)}"
        else:
            # Each bound alone can be met, both together cannot.
            least_budget = float(cost[time <= deadline].min())
            least_deadline = float(time[cost <= budget].min())
            message = (
                f"{what} within both {format_money(budget)} and {format_duration(deadline)}: "
                f"meeting the deadline needs at least {format_money(least_budget)}, and within "
                f"the budget the shortest run takes {format_duration(least_deadline)}"
            )
            return InfeasibleConstraintError(
                message, least_budget_usd=least_budget, least_deadline_s=least_deadline
            )
    elif budget is not None:
        message = f"{what} within a budget of {format_money(budget)}"
    else:
        assert deadline is not None
        message = f"{what} within a deadline of {format_duration(deadline)}"
    if budget is not None and budget < least_budget:
        message += f"; the least budget that works is {format_money(least_budget)}"
        return InfeasibleConstraintError(message, least_budget_usd=least_budget)
    message += f"; the shortest deadline that works is {format_duration(least_deadline)}"
    return InfeasibleConstraintError(message, least_deadline_s=least_deadline)


def _admitted(
    constraint: Constraint, time: NDArray[np.float64], cost: NDArray[np.float64]
) -> NDArray[np.bool_]:
    admitted = np.ones(time.shape, dtype=bool)
    if constraint.budget_usd is not None:
        admitted &= cost <= constraint.budget_usd
    if constraint.deadline_s is not None:
        admitted &= time <= constraint.deadline_s
    return admitted
