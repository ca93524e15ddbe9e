"""Adaptive training: re-plan the allocation as the online loss fit moves (CE-scaling §III-D,
Algorithm 2, eqs. 13–16), and the baselines it is compared with.

Every policy is a pure object driven by ``start()`` and one ``observe(...)`` per finished epoch;
it never runs anything. ``AdaptiveScheduler`` starts from the offline estimate of the epochs
and the best Pareto allocation for the whole budget or deadline (Alg. 2 lines 3–6); after each
epoch it refits the loss curve (line 8) and, when the predicted total epochs moved by more than
δ from the prediction its allocation was planned for (line 11), it chooses the best Pareto
allocation for the predicted remaining epochs within what is left of the budget or the time
(lines 12–13), switching with a delayed restart: the new functions start while the old ones
train the next epoch and take over at a synchronisation point (``faasml.models.restart``); the
plan charges that switching epoch as the restart model prices it, then e* − e' − 1 epochs of the
new allocation (line 12).

Choices the paper leaves open (docs/adaptive.md): the change is measured against the prediction
the current allocation was planned for (so slow drift still triggers), in both directions;
before ``TRUSTED_POINTS`` epochs, or while the prediction's interval is too wide or its floor
above the target, the last prediction stands; plans provision (1 + δ) × the predicted epochs,
the drift tolerated without re-planning; the policy also re-plans when its allocation can no
longer pay for the predicted epochs, or leaves more than δ of the budget or time unused; when
nothing fits it goes on best-effort with the allocation that buys the most epochs; and before
every epoch it checks that the epoch fits what is left, stopping otherwise, so it never spends
beyond the budget or runs past the deadline.
"""

from __future__ import annotations

from faasml.planners.adaptive.baselines import (
    TRAINING_POLICIES,
    AdaptiveScheduler,
    EveryEpochPolicy,
    NoDelayPolicy,
    StaticPolicy,
)
from faasml.planners.adaptive.frontier import training_frontier
from faasml.planners.adaptive.policy import (
    DEFAULT_DELTA,
    MIN_UNDERUSE_EPOCHS,
    TRUSTED_POINTS,
    TRUSTED_SPREAD,
    SchedulerDecision,
    TrainingPolicy,
)

__all__ = [
    "DEFAULT_DELTA",
    "MIN_UNDERUSE_EPOCHS",
    "TRAINING_POLICIES",
    "TRUSTED_POINTS",
    "TRUSTED_SPREAD",
    "AdaptiveScheduler",
    "EveryEpochPolicy",
    "NoDelayPolicy",
    "SchedulerDecision",
    "StaticPolicy",
    "TrainingPolicy",
    "training_frontier",
]
