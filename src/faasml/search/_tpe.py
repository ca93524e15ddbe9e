"""Optuna's TPE sampler behind the searcher contract (the ``tpe`` searcher, ``search`` extra).

Each feature is a float parameter over its range; a suggestion is mapped to the nearest
untried candidate, and the value measured there is told back for the candidate's own features
(so TPE learns from what was measured, not from where it aimed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from faasml._imports import optional_import
from faasml.search._base import Array, SearchBudget, Searcher


class TPESearcher(Searcher):
    """Tree-structured Parzen estimator (Optuna's ``TPESampler``, seeded)."""

    def __init__(
        self, features: Array, budget: SearchBudget, seed: int = 0, *, costs: Array | None = None
    ) -> None:
        super().__init__(features, budget, seed, costs=costs)
        optuna = optional_import("optuna", "search")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self._columns = [d for d in range(self.features.shape[1]) if np.ptp(self.features[:, d])]
        self._space: dict[str, Any] = {
            f"x{d}": optuna.distributions.FloatDistribution(
                float(self.features[:, d].min()), float(self.features[:, d].max())
            )
            for d in self._columns
        }
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=3)
        self._study = optuna.create_study(direction="minimize", sampler=sampler)

    def _propose(self) -> int:
        trial = self._study.ask(self._space)
        point = np.array([trial.params[f"x{d}"] for d in self._columns])
        untried = self.untried()
        distance = np.sum((self.features[untried][:, self._columns] - point) ** 2, axis=1)
        self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)  # replaced below
        return int(untried[np.argmin(distance)])

    def _after_observe(self) -> None:
        index, value = self.observed[-1]
        params = {f"x{d}": float(self.features[index, d]) for d in self._columns}
        self._study.add_trial(
            self._optuna.trial.create_trial(params=params, distributions=self._space, value=value)
        )
