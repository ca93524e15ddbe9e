"""Gaussian-process regression with expected improvement (SMLT §3.2), constraint-aware.

The GP (scikit-learn's ``GaussianProcessRegressor``: a Matérn-5/2 kernel with one length
scale per feature, a fixed measurement-noise term, the rest fitted by maximum likelihood)
models the measured value minus a prior mean. With a prior (the analytical model's prediction
where a profile exists) the first probe is the prior's optimum and the GP learns only the
model's error; without one, a few spread-out probes come first. Each next probe maximises

    EI(c) = [(y* − μ(c)) Φ(z) + σ(c) φ(z)] · P(c keeps the constraint),  z = (y* − μ(c)) / σ(c)

(SMLT §3.2's EI written for minimisation, times the probability of feasibility as in
constrained Bayesian optimisation, Gardner et al. 2014: y* the best posterior mean among the
measured candidates that keep the constraint, μ and σ the posterior mean and deviation, Φ and
φ the standard normal CDF and density). Before any measured candidate keeps the constraint,
y* is the best posterior mean among all candidates whose posterior keeps it (the posterior's
own choice: a probe that broke the constraint is followed by one aimed at the best that keeps
it, not merely at the candidate surest to keep it); only when none does is the probability
of keeping it alone maximised. The search stops when the largest EI left
falls below ``SearchBudget.ei_threshold`` or the budget is spent. Warm, a search whose
dollar budget cannot pay for two probes (the cheapest costs more than half of it) probes
nothing and recommends the prior's choice: one probe would spend the whole budget and leave
the choice an extrapolation from a single noisy point.

Before recommending a candidate no probe measured, the search measures it where a probe is
left (the count and the dollars): when the EI falls below the threshold, and with the last
probe of the count. A choice then is an extrapolation only where its probe does not fit what
is left (``confirm``), or where the warm search stops before any probe because no two probes
fit its dollar budget (above): the prior's choice, whose one probe may fit.

With ``repeats`` > 1, a measured candidate at the constraint's edge (its posterior chance of
keeping the constraint between Φ(−1) and Φ(1)) whose objective is within 5 % of the choice's
or better is measured again at the same points (``unsettled``; after the confirmation): one
noisy probe there may have put it on the wrong side of the edge.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from faasml.exceptions import ConfigError
from faasml.search._base import Array, SearchBudget, Searcher, check_choice

NOISE = 0.05
"""Measurement noise (deviation, observation units) a GP assumes unless told."""
GOOD = math.log(1.05)
"""A candidate is good when its objective is within this (log) of the best's: 5 %."""
SAMPLES = 256
"""Draws of the terms' scales behind ``GPEISearcher.chance_good``."""
TERM_SD = 0.5
"""Prior deviation of each model term's log scale: the model's computation or
synchronisation may be off by a factor of about e^±0.5 (0.6–1.6×) before any probe."""


@dataclass(frozen=True)
class LatentObjective:
    """Observations are a latent value g (the deployment search: log time per epoch); the
    objective of candidate c is g + ``offset[c]`` and c keeps the constraint iff
    g <= ``limit[c]`` (+inf: no constraint)."""

    offset: Array
    limit: Array


class GPEISearcher(Searcher):
    """GP + (constrained) EI over the candidates, warm-started from ``prior``."""

    uses_prior = True
    confirm = True
    """Before recommending a candidate no probe measured, measure it where a probe is left
    and its price fits (see ``_unconfirmed``)."""

    def __init__(
        self,
        features: Array,
        budget: SearchBudget,
        seed: int = 0,
        *,
        prior: Array | None = None,
        initial: int = 3,
        objective: LatentObjective | None = None,
        costs: Array | None = None,
        noise: float = NOISE,
        terms: Array | None = None,
        center: Array | None = None,
        term_sd: float | Array = TERM_SD,
        choice: str = "upper",
        repeats: int = 1,
    ) -> None:
        """``prior``: a mean of the observed value per candidate. ``objective``: what the
        observations mean (default: the value itself, unconstrained). ``noise``: the
        measurement's deviation in the observations' units (0.05: 5 % on a log scale), fixed:
        a handful of probes cannot tell noise from signal.

        ``terms`` (k × candidates, positive): the prior mean is the log of a sum of terms
        (the analytical model's computation, synchronisation, rest), each with a scale e^θ
        learnt from the probes (θ ~ N(``center``, ``term_sd``²), default centre 0); ``prior``
        is then added to it (a re-trigger's learnt residual).

        ``choice``: how ``best`` chooses once a probe was measured: ``upper`` (the lowest
        objective upper bound among the candidates whose posterior mean keeps the
        constraint) or ``likeliest`` (with terms: the candidate most likely to keep the
        constraint *and* be within 5 % of the best, ``chance_good``).

        ``repeats``: how many times a candidate may be measured (1: never again). Above 1,
        where the search would stop or with its last probe, a measured candidate the
        posterior cannot tell keeps the constraint (``unsettled``) is measured again."""
        super().__init__(features, budget, seed, costs=costs)
        self.choice = check_choice(choice)
        if not (isinstance(repeats, int) and repeats >= 1):
            raise ConfigError(f"the value of repeats is {repeats!r}, but must be an integer >= 1")
        self.repeats = repeats
        if prior is not None:
            prior = np.asarray(prior, dtype=float)
            if prior.shape != (len(self),) or not np.all(np.isfinite(prior)):
                raise ConfigError(
                    f"a prior needs one finite value per candidate ({len(self)}); "
                    f"got shape {prior.shape}"
                )
        if not (np.isfinite(noise) and noise > 0):
            raise ConfigError(f"the value of noise is {noise}, but must be positive")
        self.terms: Array | None = None
        if terms is not None:
            terms = np.asarray(terms, dtype=float)
            if terms.ndim != 2 or terms.shape[1] != len(self) or not np.all(terms >= 0):
                raise ConfigError(
                    f"terms need one non-negative row per term and one column per candidate "
                    f"({len(self)}); got shape {terms.shape}"
                )
            self.terms = np.maximum(terms, 0.0)
            self.center = (
                np.zeros(len(terms)) if center is None else np.asarray(center, dtype=float)
            )
            self.term_sd: Array = np.broadcast_to(
                np.asarray(term_sd, dtype=float), (len(terms),)
            ).copy()
            if self.center.shape != (len(terms),) or not np.all(self.term_sd > 0):
                raise ConfigError(
                    f"center and term_sd need one value per term ({len(terms)}), term_sd > 0"
                )
            self.theta = self.center.copy()
            self._theta_cov = np.diag(self.term_sd**2)
            self._shift = np.zeros(len(self)) if prior is None else prior
            prior = self._structured(np.arange(len(self)))
        self.prior = prior
        self.noise = noise
        self.goal = objective or LatentObjective(np.zeros(len(self)), np.full(len(self), np.inf))
        self.initial = 1 if prior is not None else max(1, initial)
        """Probes before EI takes over: the prior's optimum, or a spread-out design."""
        self._gp: object | None = None
        self._offset = 0.0

    # ------------------------------------------------------------------ model

    def _prior_at(self, rows: np.ndarray) -> Array:
        if self.terms is not None:
            return self._structured(rows)
        if self.prior is None:
            return np.zeros(len(rows))
        result: Array = self.prior[rows]
        return result

    def _structured(self, rows: np.ndarray, theta: Array | None = None) -> Array:
        """log Σ_k e^θ_k · term_k + shift at ``rows``."""
        assert self.terms is not None
        scales = np.exp(self.theta if theta is None else theta)
        total = scales @ self.terms[:, rows]
        result: Array = np.log(np.maximum(total, 1e-300)) + self._shift[rows]
        return result

    def _shares(self, rows: np.ndarray) -> Array:
        """∂ prior / ∂θ at ``rows``: each term's share of the sum (rows × terms)."""
        assert self.terms is not None
        part = np.exp(self.theta)[:, None] * self.terms[:, rows]
        result: Array = (part / np.maximum(part.sum(axis=0), 1e-300)).T
        return result

    def _deviations(self) -> Array:
        """Each observation's noise deviation: its own (a shorter probe's), else ``noise``."""
        return np.array([self.noise if d is None else max(d, self.noise) for d in self.noises])

    def _fit_terms(self, rows: np.ndarray, values: Array) -> None:
        """MAP of the terms' log scales θ (Gaussian prior, Gaussian noise of each
        observation's deviation) by Gauss-Newton, and its Laplace covariance: a calibration
        of the model from the probes."""
        theta = self.center.copy()
        precision = np.diag(1.0 / self.term_sd**2)
        noise = self._deviations()[:, None]
        for _ in range(20):
            self.theta = theta
            jac = self._shares(rows) / noise
            gap = (values - self._structured(rows)) / noise[:, 0]
            hessian = jac.T @ jac + precision
            gradient = jac.T @ gap - precision @ (theta - self.center)
            step = np.linalg.solve(hessian, gradient)
            theta = theta + np.clip(step, -1.0, 1.0)
            if float(np.max(np.abs(step))) < 1e-6:
                break
        self.theta = theta
        jac = self._shares(rows) / noise
        self._theta_cov = np.asarray(np.linalg.inv(jac.T @ jac + precision), dtype=float)

    def _after_observe(self) -> None:
        from faasml._imports import optional_import

        gaussian = optional_import("sklearn.gaussian_process", "search")
        kernels = optional_import("sklearn.gaussian_process.kernels", "search")
        regressor = gaussian.GaussianProcessRegressor

        rows = np.array([i for i, _ in self.observed])
        values = np.array([v for _, v in self.observed])
        dims = self.features.shape[1]
        if self.terms is not None:
            self._fit_terms(rows, values)
        residual = values - self._prior_at(rows)
        # The model's error is mostly a constant factor (a log offset): taken out as the mean,
        # the GP learns what varies over the space, in the observations' own units. (With
        # terms, their learnt scales already took it out.)
        self._offset = 0.0 if self.terms is not None else float(np.mean(residual))
        kernel = kernels.ConstantKernel(0.25, (1e-4, 1e2)) * kernels.Matern(
            length_scale=np.full(dims, 0.3), length_scale_bounds=(0.03, 10.0), nu=2.5
        ) + kernels.WhiteKernel(self.noise**2, "fixed")
        # A noisier observation (a shorter probe) adds its excess variance to the white term.
        extra = np.maximum(self._deviations() ** 2 - self.noise**2, 0.0)
        gp = regressor(
            kernel=kernel,
            alpha=1e-10 + extra,
            normalize_y=False,
            n_restarts_optimizer=1,
            random_state=self.seed,
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
        deviation = np.maximum(np.asarray(std, dtype=float), 1e-9)
        return np.asarray(mean, dtype=float) + self._offset, deviation

    def scales(self) -> tuple[Array, Array] | None:
        """The terms' learnt log scales and their deviations (None without terms)."""
        if self.terms is None:
            return None
        return self.theta.copy(), np.sqrt(np.diag(self._theta_cov))

    def posterior(self) -> tuple[Array, Array]:
        """Posterior mean and deviation of the observed value of every candidate."""
        rows = np.arange(len(self))
        mean, std = self.residual(self.features)
        if self.terms is not None:
            shares = self._shares(rows)
            spread = np.einsum("ij,jk,ik->i", shares, self._theta_cov, shares)
            std = np.sqrt(std**2 + np.maximum(spread, 0.0))
        return mean + self._prior_at(rows), std

    def feasible(self) -> Array:
        """P(candidate keeps the constraint) under the posterior."""
        mean, std = self.posterior()
        result: Array = norm.cdf((self.goal.limit - mean) / std)
        return result

    def keeps_none(self) -> bool:
        """True when no candidate a recommendation may name keeps the constraint under the
        posterior mean (before any probe, the prior mean): the search's verdict that the
        constraint cannot be kept, as far as its evidence shows."""
        mean, _ = self.posterior()
        return not bool(np.any((mean <= self.goal.limit) & self.eligible()))

    def expected_improvement(self) -> Array:
        """Constrained EI of every candidate (see the module docstring)."""
        mean, std = self.posterior()
        objective = mean + self.goal.offset
        keeps = norm.cdf((self.goal.limit - mean) / std)
        tried = np.array(sorted(self.tried()))
        ok = tried[mean[tried] <= self.goal.limit[tried]]
        if ok.size == 0:
            # No probe keeps the constraint yet: improve on the posterior's own choice (the
            # best posterior mean that keeps it), else find one that keeps it at all.
            ok = np.flatnonzero((mean <= self.goal.limit) & self.eligible())
            if ok.size == 0:
                result: Array = keeps
                return result
        best = float(objective[ok].min())
        gain = best - objective
        z = gain / std
        result = (gain * norm.cdf(z) + std * norm.pdf(z)) * keeps
        return result

    # ------------------------------------------------------------------ contract

    def _own_stop(self) -> str | None:
        count = len(self.observed)
        if count == 0 and self.prior is not None and self.costs is not None:
            cap = self.budget.max_usd
            cheapest = float(self.costs[self.untried()].min())
            if cap is not None and cheapest > cap / 2:
                return (
                    f"no two probes fit the search budget (${cap:.6g}; the cheapest probe "
                    f"costs ${cheapest:.6g}): the model's choice, unmeasured"
                )
        if count < max(self.initial, self.budget.min_probes):
            return None
        mean, _ = self.posterior()
        tried = np.array(sorted(self.tried()))
        if not np.any(mean[tried] <= self.goal.limit[tried]):
            return None  # nothing found that keeps the constraint: go on looking
        ei = self.expected_improvement()[self.untried()]
        top = float(ei.max()) if ei.size else 0.0
        if top < self.budget.ei_threshold:
            if self._unconfirmed() is not None or self.unsettled() is not None:
                return None  # the choice is measured first, or again (``_propose``)
            return (
                f"expected improvement {top:.4f} below the threshold "
                f"{self.budget.ei_threshold:g} after {count} probes"
            )
        return None

    def _unconfirmed(self) -> int | None:
        """The posterior's choice when no probe measured it and a probe of it fits what is
        left (count and dollars); else None."""
        if not self.confirm or self._gp is None:
            return None
        choice = self.best()
        return choice if choice in set(self.untried().tolist()) else None

    def unsettled(self) -> int | None:
        """A measured candidate to measure again (``repeats`` > 1), or None: among those
        measured fewer than ``repeats`` times whose probe fits the dollars left, whose
        posterior objective is within ``GOOD`` of the choice's or better, and whose chance
        of keeping the constraint the posterior puts between Φ(−1) and Φ(1) (its edge is
        within one deviation: one noisy probe may have put it on the wrong side), the one
        with the lowest posterior objective. A repeat halves the noise's variance there."""
        if self.repeats <= 1 or self._gp is None or not np.isfinite(self.goal.limit).any():
            return None
        counts = np.bincount([i for i, _ in self.observed], minlength=len(self))
        mask = (counts > 0) & (counts < self.repeats) & self.allowed
        cap = self.max_usd()
        if self.costs is not None and cap is not None:
            mask &= self.costs <= cap - self.spent_usd
        if not mask.any():
            return None
        mean, std = self.posterior()
        objective = mean + self.goal.offset
        z = (self.goal.limit - mean) / std
        mask &= (np.abs(z) < 1.0) & (objective <= objective[self.best()] + GOOD)
        if not mask.any():
            return None
        return int(np.flatnonzero(mask)[np.argmin(objective[mask])])

    def _propose(self) -> int:
        untried = self.untried()
        last = len(self.observed) >= self.budget.max_probes - 1
        if len(self.observed) >= self.initial and (last or self._ei_low()):
            choice = self._unconfirmed()
            if choice is None:
                choice = self.unsettled()
            if choice is not None:
                return choice
        if len(self.observed) < self.initial:
            if self.prior is not None:
                return int(untried[self._ranked(self.prior[untried], untried)])
            return self._spread(untried)
        ei = self.expected_improvement()[untried]
        return int(untried[np.argmax(ei)])

    def _ei_low(self) -> bool:
        ei = self.expected_improvement()[self.untried()]
        return float(ei.max()) < self.budget.ei_threshold if ei.size else True

    def _ranked(self, value: Array, rows: np.ndarray) -> int:
        """Position in ``rows`` of the best by ``value``: the lowest objective among those
        that keep the constraint, else the least violation."""
        over = value - self.goal.limit[rows]
        if np.any(over <= 0):
            objective = np.where(over <= 0, value + self.goal.offset[rows], np.inf)
            return int(np.argmin(objective))
        return int(np.argmin(over))

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

    def chance_good(self, eligible: np.ndarray | None = None) -> Array | None:
        """Per candidate, the posterior probability that it keeps the constraint and its
        objective is within ``GOOD`` (5 %) of the best among the ``eligible`` ones that keep
        it: ``SAMPLES`` draws of the terms' log scales θ from their posterior (the Laplace
        approximation of ``_fit_terms``, or the prior before any probe), each with the GP's
        mean residual. The draws move every candidate together (the job's level of speed,
        the error that moves the constraint's edge); None without terms."""
        if self.terms is None:
            return None
        mask = self.eligible() if eligible is None else eligible
        rng = np.random.default_rng(self.seed)
        thetas = rng.multivariate_normal(self.theta, self._theta_cov, size=SAMPLES)
        total = np.einsum("sk,kc->sc", np.exp(thetas), self.terms)
        value = np.log(np.maximum(total, 1e-300)) + self._shift
        if self._gp is not None:
            mean, std = self.residual(self.features)
            # The GP's doubt of the latent (its deviation less the measurement noise), drawn
            # independently per candidate: an unprobed candidate is good in fewer draws.
            latent = np.sqrt(np.maximum(std**2 - self.noise**2, 0.0))
            value = value + mean + latent * rng.standard_normal(value.shape)
        keeps = (value <= self.goal.limit) & mask
        objective = value + self.goal.offset
        top = np.where(keeps, objective, np.inf).min(axis=1, keepdims=True)
        good = keeps & (objective <= top + GOOD)
        result: Array = good.mean(axis=0)
        return result

    def _likeliest(self) -> int | None:
        """The eligible candidate most likely good (ties: the lower posterior objective), or
        None where no draw finds one (``chance_good``); where any eligible one's posterior
        mean keeps the constraint within the noise, one of those (the user's constraint is
        not traded for a likelier optimum)."""
        if self.choice != "likeliest" or self.terms is None:
            return None
        mask = self.eligible()
        chance = self.chance_good(mask)
        if chance is None or float(chance.max()) <= 0:
            return None
        mean, _ = self.posterior()
        within = mask & (mean <= self.goal.limit + self.noise)
        if within.any():  # never one the posterior says breaks the constraint beyond the noise
            mask = within
        objective = np.where(mask, mean + self.goal.offset, np.inf)
        order = np.lexsort((objective, -np.where(mask, chance, -1.0)))
        return int(order[0])

    def best(self) -> int:
        """The posterior's choice: among the candidates whose posterior mean keeps the
        constraint, the lowest upper bound of the objective (posterior mean + one deviation,
        so a lucky measurement does not win over a well-measured candidate, and a candidate
        far from every probe wins only by a clear margin); else the least violation among the
        measured ones (the allowed ones, where any is). Unmeasured candidates count (a probe
        too dear for the search budget may still be the best deployment), but only those
        ``restrict`` lets it choose."""
        likeliest = self._likeliest() if self._gp is not None else None
        if likeliest is not None:
            return likeliest
        if self._gp is None:
            if not self.observed and self.prior is not None:
                # No probe fitted the budget: the prior's own choice.
                rows = np.flatnonzero(self.eligible())
                return int(rows[self._ranked(self.prior[rows], rows)])
            return super().best()
        mean, std = self.posterior()
        keeps = (mean <= self.goal.limit) & self.eligible()
        if keeps.any():
            upper = np.where(keeps, mean + std + self.goal.offset, np.inf)
            return int(np.argmin(upper))
        rows = np.array(sorted(self.tried()))
        if self.allowed[rows].any():
            rows = rows[self.allowed[rows]]
        return int(rows[np.argmin(mean[rows] - self.goal.limit[rows])])
