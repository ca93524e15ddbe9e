"""Resource partitioning for successive-halving tuning (CE-scaling §III-C, MISSION C4).

from faasml.planners.tuning import SuccessiveHalving, plan_tuning
plan = plan_tuning(workload, catalog, Constraint(budget_usd=50), SuccessiveHalving(1024))
"""

from faasml.models.shape import SuccessiveHalving
from faasml.planners.tuning._job import Stages, TuningJob, concatenate, hyperband
from faasml.planners.tuning._plan import (
    Optimality,
    TuningPlan,
    TuningSetup,
    plan_from,
    plan_tuning,
    retarget,
    tuning_problem,
)
from faasml.planners.tuning._planners import TUNING_PLANNERS, TuningPlanner
from faasml.planners.tuning._problem import (
    StageOptions,
    TuningProblem,
    build_problem,
    trials_per_wave,
    tuning_candidates,
)

__all__ = [
    "TUNING_PLANNERS",
    "Optimality",
    "StageOptions",
    "Stages",
    "SuccessiveHalving",
    "TuningJob",
    "TuningPlan",
    "TuningPlanner",
    "TuningProblem",
    "TuningSetup",
    "build_problem",
    "concatenate",
    "hyperband",
    "plan_from",
    "plan_tuning",
    "retarget",
    "trials_per_wave",
    "tuning_candidates",
    "tuning_problem",
]
