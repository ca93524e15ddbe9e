"""A user-style model factory for tests and examples: logistic regression whose evaluation
reports an extra metric through ``faasml.report``."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.workloads.context import report
from faasml.workloads.linear import LogisticRegression


class ReportingLogisticRegression(LogisticRegression):
    """Logistic regression that reports the share of positive predictions when evaluated."""

    def evaluate(
        self, params: NDArray[np.float32], features: NDArray[Any], labels: NDArray[np.int64]
    ) -> dict[str, float]:
        scores = super().evaluate(params, features, labels)
        report(evaluated_samples=float(len(labels)))
        return scores


def reporting_logreg(features: int = 28) -> ReportingLogisticRegression:
    """Factory for ``model: faasml.testing.models:reporting_logreg`` in a job file."""
    return ReportingLogisticRegression((features,), 2)
