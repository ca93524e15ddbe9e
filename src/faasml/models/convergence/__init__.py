"""Loss-curve fitting and epochs-to-target prediction (CE-scaling §II-C2 Finding 2, §III-D).

Every family is l(k) = a·g(k; θ) + c with a, c ≥ 0 and one shape parameter θ > 0:

- ``inverse`` (Optimus): l(k) = 1/(β₀k + β₁) + β₂. With ρ = β₁/β₀ it reads
  (1/β₀)·1/(k + ρ) + β₂, so a = 1/β₀, c = β₂, θ = ρ.
- ``exponential``: l(k) = a·exp(−θk) + c.
- ``power``: l(k) = a·(k + 1)^(−θ) + c.

Fitting is variable projection: for each θ on a log grid the linear part (a, c) is solved by
non-negative least squares in closed form, all grid points at once; the best θ is refined on
a finer grid. Loss spikes are first rejected by a leave-one-out F test (the externally
studentised residual of the worst point, Bonferroni-corrected), then the remaining points are
down-weighted by two rounds of Huber reweighting. ``family="auto"`` fits every family and keeps
the one with the smallest weighted residual (the inverse family wins ties: Optimus' curve is
the default). ``predict_epochs`` averages the families and can take the offline estimate as a
log-normal prior (Algorithm 2 line 3's e₀), combined with the online prediction in log space.

The uncertainty of a prediction comes from the Gauss–Newton covariance of (θ, a, c): 256
parameter draws (fixed seed, so the same data give the same interval) are pushed through the
closed-form inverse of the curve and the 10th and 90th percentiles reported.
"""

from __future__ import annotations

from faasml.models.convergence.families import FAMILIES
from faasml.models.convergence.fit import (
    MIN_POINTS,
    EpochPrediction,
    LossFit,
    fit_loss_curve,
    whole_epochs,
)
from faasml.models.convergence.predict import (
    DEFAULT_PRIOR_SIGMA,
    AveragedPrediction,
    predict_epochs,
)

__all__ = [
    "DEFAULT_PRIOR_SIGMA",
    "FAMILIES",
    "MIN_POINTS",
    "AveragedPrediction",
    "EpochPrediction",
    "LossFit",
    "fit_loss_curve",
    "predict_epochs",
    "whole_epochs",
]
