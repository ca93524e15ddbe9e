"""Baseline searchers: uniform random sampling, and a coarse grid over the feature space."""

from __future__ import annotations

import math

import numpy as np

from faasml.search._base import Array, SearchBudget, Searcher


class RandomSearcher(Searcher):
    """Candidates drawn uniformly without replacement (seeded)."""

    def _propose(self) -> int:
        return int(self.rng.choice(self.untried()))


class GridSearcher(Searcher):
    """A grid of ``max_probes`` points spread evenly over the scaled features: ⌈P^(1/d)⌉ levels
    per feature that varies, each grid point mapped to its nearest untried candidate, visited
    in a seeded order (so a budget cut early still covers the space coarsely)."""

    def __init__(
        self, features: Array, budget: SearchBudget, seed: int = 0, *, costs: Array | None = None
    ) -> None:
        super().__init__(features, budget, seed, costs=costs)
        x = self.features
        varying = [d for d in range(x.shape[1]) if np.ptp(x[:, d]) > 0]
        levels = max(2, math.ceil(budget.max_probes ** (1 / max(len(varying), 1))))
        axes = [np.linspace(x[:, d].min(), x[:, d].max(), levels) for d in varying]
        mesh = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)
        order = self.rng.permutation(len(mesh))
        chosen: list[int] = []
        for point in mesh[order]:
            distance = np.sum((x[:, varying] - point) ** 2, axis=1)
            distance[chosen] = np.inf
            chosen.append(int(np.argmin(distance)))
            if len(chosen) == len(self):
                break
        self._queue = chosen

    def _propose(self) -> int:
        allowed = set(self.untried().tolist())
        for index in self._queue:
            if index in allowed:
                return index
        return int(self.rng.choice(self.untried()))
