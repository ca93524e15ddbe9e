"""The tuning knapsack as a MILP solved by HiGHS: the exact planner's fallback when both
bounds are given and states were merged, and a cross-check of it."""

from __future__ import annotations

import numpy as np

from faasml.exceptions import InfeasibleConstraintError
from faasml.planners.tuning._exact_bounds import _LIMIT_SLACK, ExactSolution, _roles
from faasml.planners.tuning._problem import TuningProblem

MILP_TIME_LIMIT_S = 30.0
"""HiGHS's time limit when it is the fallback (both bounds given and states were merged)."""


def exact_options_milp(problem: TuningProblem) -> tuple[int, ...]:
    """The same problem as a MILP solved by HiGHS to a zero gap (a cross-check; slower)."""
    return _milp_solution(problem, time_limit_s=None).options


MILP_CUTS = 50
"""Most plans HiGHS may return over a limit by less than its tolerance before the MILP is
said to have none within it (each is cut off and the MILP solved again)."""


def _milp_solution(
    problem: TuningProblem, time_limit_s: float | None = MILP_TIME_LIMIT_S
) -> ExactSolution:
    """HiGHS on the MILP (x_ij ∈ {0, 1}, Σ_j x_ij = 1, Σ G·x ≤ limit, Σ F·x ≤ F's bound);
    proven optimal when HiGHS closes the gap, else the best plan found with its gap."""
    # Imported here: scipy takes a second to import, and the CLI's parsers reach this module.
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array

    fs, gs, g_limit, f_limit = _roles(problem)
    sizes = np.array([len(f) for f in fs])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    f_all, g_all = np.concatenate(fs), np.concatenate(gs)
    total = int(sizes.sum())
    stage_of = np.repeat(np.arange(len(fs)), sizes)
    rows = [LinearConstraint(csr_array((np.ones(total), (stage_of, np.arange(total)))), 1, 1)]
    for values, limit in ((g_all, g_limit), (f_all, f_limit)):
        if np.isfinite(limit):
            rows.append(LinearConstraint(values[None, :] / limit, -np.inf, 1.0))
    scale = float(np.abs(f_all).max()) or 1.0
    options: dict[str, float] = {"mip_rel_gap": 0.0}
    if time_limit_s is not None:
        options["time_limit"] = time_limit_s
    for _ in range(MILP_CUTS):
        result = milp(
            f_all / scale,
            integrality=np.ones(total),
            bounds=Bounds(0, 1),
            constraints=rows,
            options=options,
        )
        if result.x is None:
            raise InfeasibleConstraintError(f"no plan meets the constraint ({result.message})")
        picked = np.flatnonzero(result.x > 0.5)
        # HiGHS accepts a row broken by up to its feasibility tolerance (1e-6 relative here):
        # a plan over a limit by that much is cut off (no-good cut) and the MILP solved again.
        if all(
            float(values[picked].sum()) <= limit * (1 + _LIMIT_SLACK)
            for values, limit in ((g_all, g_limit), (f_all, f_limit))
        ):
            break
        cut = np.zeros(total)
        cut[picked] = 1.0
        rows.append(LinearConstraint(cut[None, :], -np.inf, len(picked) - 1))
    else:
        raise InfeasibleConstraintError(
            f"no plan found within the constraint: HiGHS's last {MILP_CUTS} plans each broke a "
            "limit by less than its tolerance"
        )
    choice = tuple(int(j - starts[stage_of[j]]) for j in picked)
    value = sum(float(f[j]) for f, j in zip(fs, choice, strict=True))
    if result.status == 0:
        return ExactSolution(choice, value, value, True, _MILP)
    bound = getattr(result, "mip_dual_bound", None)
    lower = float(bound) * scale if bound is not None and np.isfinite(bound) else 0.0
    return ExactSolution(choice, value, min(lower, value), False, _MILP)


_MILP = "HiGHS MILP"
