"""Machine-readable and human-readable forms of plans and runs."""

from faasml.reports.plan_json import breakdown_dict, train_plan_dict
from faasml.reports.tune_json import comparison_dict, tune_plan_dict, tune_simulation_dict

__all__ = ["breakdown_dict", "train_plan_dict"]
__all__ += ["comparison_dict", "tune_plan_dict", "tune_simulation_dict"]
