"""Offline epoch prediction by sampling (LambdaML-style baseline; CE-scaling §II-C2, Fig. 4a).

Train on a small sample of the data for a few epochs, fit the loss curve to that run and
extrapolate to the target, taking an epoch over the sample to stand for an epoch over the
whole data. That assumption is where the method errs (the paper measures errors up to 40 %);
the online fit of the real run (``fit_loss_curve``) replaces it as training goes on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from faasml.exceptions import ConfigError
from faasml.models.convergence import EpochPrediction, LossFit, predict_epochs


@dataclass(frozen=True)
class OfflineEstimate:
    """Epochs predicted for the full data from a run on a sample of it."""

    prediction: EpochPrediction
    fit: LossFit
    sample_fraction: float
    sample_epochs: int

    @property
    def epochs(self) -> int:
        """Whole epochs to plan for."""
        return self.prediction.whole


def offline_estimate(
    epochs: Sequence[int],
    losses: Sequence[float],
    target_loss: float,
    *,
    sample_fraction: float,
    family: str = "auto",
) -> OfflineEstimate:
    """Predict the epochs to ``target_loss`` from a sample run's (epoch, loss) points
    (``predict_epochs``: averaged over the curve families).

    Raises UnreachableTargetError when the sample run's fitted floor is above the target, and
    ConfigError for a sample fraction outside (0, 1] or too few points.
    """
    if not (math.isfinite(sample_fraction) and 0 < sample_fraction <= 1):
        raise ConfigError(
            f"the value of sample_fraction is {sample_fraction}, but must be in (0, 1]"
        )
    averaged = predict_epochs(epochs, losses, target_loss, family)
    return OfflineEstimate(
        prediction=averaged.prediction,
        fit=averaged.best,
        sample_fraction=sample_fraction,
        sample_epochs=len(epochs),
    )
