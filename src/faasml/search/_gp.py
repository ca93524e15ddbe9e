"""Gaussian-process regression with expected improvement (SMLT §3.2).

The GP (scikit-learn's ``GaussianProcessRegressor``: a Matérn-5/2 kernel with one length
scale per feature, a learned noise term, hyperparameters fitted by maximum likelihood) models
the measured value minus a prior mean. With a prior (the analytical model's prediction where
a profile exists) the first probe is the prior's optimum and the GP learns only the model's
error; without one, a few spread-out probes come first. Each next probe maximises

    EI(c) = (y* − μ(c)) Φ(z) + σ(c) φ(z),   z = (y* − μ(c)) / σ(c)

(SMLT §3.2, written for minimisation: y* the lowest value measured, μ and σ the posterior
mean and deviation, Φ and φ the standard normal CDF and density). The search stops when the
largest EI left falls below ``SearchBudget.ei_threshold`` or the budget is spent.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from faasml.exceptions import ConfigError
from faasml.search._base import Array, SearchBudget, Searcher

Link = Callable[[NDArray[np.int64], Array], tuple[Array, Array]]
"""(candidates, latent values) -> (objective values, d objective / d latent)."""

NOISE = 0.05
"""Measurement noise (deviation, observation units) a GP assumes unless told."""


class GPEISearcher(Searcher):
    """GP + EI over the candidates, warm-started from ``prior`` (a mean per candidate)."""

    uses_prior = True

    def __init__(
        self,
        features: Array,
        budget: SearchBudget,
        seed: int = 0,
        *,
        prior: Array | None = None,
        initial: int = 3,
        link: Link | None = None,
        costs: Array | None = None,
        noise: float = NOISE,
    ) -> None:
        """With a ``link``, observations are a latent quantity (the deployment search: log
        time per epoch) and the objective minimised is ``link`` of it at each candidate; its
        deviation is the link's slope times the latent's. ``noise`` is the measurement's
        deviation in the observations' units (0.05: 5 % on a log scale), fixed: a handful of
        probes cannot tell noise from signal, and a probe's rounds give its spread."""
        super().__init__(features, budget, seed, costs=costs)
        if not (np.isfinite(noise) and noise > 0):
            raise ConfigError(f"the value of noise is {noise}, but must be positive")
        self.noise = noise
        self.link = link
        if prior is not None:
            prior = np.asarray(prior, dtype=float)
            if prior.shape != (len(self),) or not np.all(np.isfinite(prior)):
                raise ConfigError(
                    f"a prior needs one finite value per candidate ({len(self)}); "
                    f"got shape {prior.shape}"
                )
        self.prior = prior
        self.initial = 1 if prior is not None else max(1, initial)
        """Probes before EI takes over: the prior's optimum, or a spread-out design."""
        self._gp: object | None = None
        self._offset = 0.0

    # ------------------------------------------------------------------ model

    def _prior_at(self, rows: np.ndarray) -> Array:
        if self.prior is None:
            return np.zeros(len(rows))
        result: Array = self.prior[rows]
        return result

    def _after_observe(self) -> None:
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        rows = np.array([i for i, _ in self.observed])
        values = np.array([v for _, v in self.observed])
        dims = self.features.shape[1]
        residual = values - self._prior_at(rows)
        # The model's error is mostly a constant factor (a log offset): taken out as the mean,
        # the GP learns what varies over the space, in the objective's own units (so the noise
        # term reads as a relative measurement noise: 0.05 ≈ 5 %).
        self._offset = float(np.mean(residual))
        kernel = ConstantKernel(0.25, (1e-4, 1e2)) * Matern(
            length_scale=np.full(dims, 0.3), length_scale_bounds=(0.03, 10.0), nu=2.5
        ) + WhiteKernel(self.noise**2, "fixed")
        gp = GaussianProcessRegressor(
            kernel=kernel, normalize_y=False, n_restarts_optimizer=1, random_state=self.seed
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bounds reached on a few points: expected
            gp.fit(self.features[rows], residual - self._offset)
        self._gp = gp

    def residual(self, features: Array) -> tuple[Array, Array]:
        """Mean and deviation of what the GP learnt (value − prior) at ``features``."""
        x = np.asarray(features, dtype=float)
        if self._gp is None:
            return np.zeros(len(x)), np.ones(len(x))
        mean, std = self._gp.predict(x, return_std=True)  # type: ignore[attr-defined]
        return np.asarray(mean, dtype=float) + self._offset, np.maximum(
            np.asarray(std, dtype=float), 1e-9
        )

    def posterior(self) -> tuple[Array, Array]:
        """Posterior mean and deviation of the value of every candidate."""
        mean, std = self.residual(self.features)
        return mean + self._prior_at(np.arange(len(self))), std

    def objective(self) -> tuple[Array, Array]:
        """Posterior mean and deviation of the objective of every candidate."""
        mean, std = self.posterior()
        if self.link is None:
            return mean, std
        value, slope = self.link(np.arange(len(self)), mean)
        return value, np.maximum(np.abs(slope) * std, 1e-9)

    def expected_improvement(self) -> Array:
        """EI of every candidate (SMLT §3.2, for minimisation); y* is the lowest posterior
        mean among the measured candidates (measurements are noisy)."""
        mean, std = self.objective()
        best = float(mean[sorted(self.tried())].min())
        gain = best - mean
        z = gain / std
        result: Array = gain * norm.cdf(z) + std * norm.pdf(z)
        return result

    # ------------------------------------------------------------------ contract

    def _own_stop(self) -> str | None:
        count = len(self.observed)
        if count < max(self.initial, self.budget.min_probes):
            return None
        ei = self.expected_improvement()[self.untried()]
        top = float(ei.max()) if ei.size else 0.0
        if top < self.budget.ei_threshold:
            return (
                f"expected improvement {top:.4f} below the threshold "
                f"{self.budget.ei_threshold:g} after {count} probes"
            )
        return None

    def _propose(self) -> int:
        untried = self.untried()
        if len(self.observed) < self.initial:
            if self.prior is not None:
                start = self.prior
                if self.link is not None:
                    start, _ = self.link(np.arange(len(self)), self.prior)
                return int(untried[np.argmin(start[untried])])
            return self._spread(untried)
        ei = self.expected_improvement()[untried]
        return int(untried[np.argmax(ei)])

    def _spread(self, untried: np.ndarray) -> int:
        """A spread-out design: the first probe at random, then the candidate (of a random
        sample) farthest from every probe so far."""
        if not self.observed:
            return int(self.rng.choice(untried))
        sample = self.rng.choice(untried, size=min(len(untried), 512), replace=False)
        done = self.features[[i for i, _ in self.observed]]
        gaps = np.min(
            np.sum((self.features[sample][:, None, :] - done[None, :, :]) ** 2, axis=2), axis=1
        )
        return int(sample[np.argmax(gaps)])

    def best(self) -> int:
        """The measured candidate with the lowest upper bound (posterior mean + one deviation):
        a lucky measurement of a worse candidate does not win over a well-measured one."""
        if self._gp is None:
            return super().best()
        rows = sorted(self.tried())
        mean, std = self.objective()
        bound = mean + std
        return int(min(rows, key=lambda i: (bound[i], i)))
