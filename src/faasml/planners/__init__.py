"""Pure planners: workload + catalog + models -> plan (no I/O, no runtime imports)."""

from faasml.planners.pareto import pareto_front, pareto_indices
from faasml.planners.training import plan_training

__all__ = ["pareto_front", "pareto_indices", "plan_training"]
from faasml.planners.tuning import TUNING_PLANNERS, SuccessiveHalving, plan_tuning

__all__ += ["TUNING_PLANNERS", "SuccessiveHalving", "plan_tuning"]
