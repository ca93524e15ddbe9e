"""The training policies compared: CE-scaling's adaptive scheduler and its baselines, by
name in ``TRAINING_POLICIES``."""

from __future__ import annotations

from faasml.planners.adaptive.policy import TrainingPolicy
from faasml.registry import Registry


class AdaptiveScheduler(TrainingPolicy):
    """CE-scaling's adaptive resource scheduler (Algorithm 2) with a delayed restart."""

    name = "adaptive"
    delayed_restart = True


class NoDelayPolicy(TrainingPolicy):
    """Cirrus-like: the same online prediction and δ, but restarts without delay."""

    name = "no-delay"
    delayed_restart = False


class EveryEpochPolicy(TrainingPolicy):
    """Siren-like: re-plans after every epoch (no δ), restarting without delay."""

    name = "every-epoch"
    delayed_restart = False

    def _should_replan(self, predicted: float) -> tuple[bool, str]:
        return True, f"re-planning every epoch (predicted {predicted:.1f} epochs)"


class StaticPolicy(TrainingPolicy):
    """LambdaML-like: the offline estimate's best allocation, kept until the target is reached;
    it does not watch the budget or the deadline while it runs."""

    name = "static"
    guarded = False

    def _should_replan(self, predicted: float) -> tuple[bool, str]:
        return False, "static allocation from the offline estimate"


TRAINING_POLICIES: Registry[type[TrainingPolicy]] = Registry("training policy")
TRAINING_POLICIES.register("adaptive", AdaptiveScheduler)
TRAINING_POLICIES.register("no-delay", NoDelayPolicy)
TRAINING_POLICIES.register("every-epoch", EveryEpochPolicy)
TRAINING_POLICIES.register("static", StaticPolicy)
