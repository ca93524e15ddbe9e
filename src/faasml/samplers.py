"""Samplers by name: how a tuning run draws its trials' configurations from a ``SearchSpace``.

- ``random``: ``SearchSpace.sample``'s seeded draws (configuration i depends on (seed, i) only).
- ``grid``: every combination of the ``choice`` values and of ``grid_points`` (default 3) evenly
  spaced values of each numeric range (log-spaced for ``loguniform``, distinct integers for
  ``int``), in a seeded shuffled order; fewer trials than combinations take the first ones,
  more repeat the grid from its start.
- ``tpe`` / ``gp``: Optuna's ``TPESampler`` / ``GPSampler``, seeded, on an in-memory study
  built from the results told (``observe``). Results are compared at one budget only: the
  largest number of epochs at which at least ``min_points`` configurations were measured
  (BOHB's rule, N_min + 2 with N_min = d + 1 for d parameters). Until a budget has that many,
  the draws are ``random``'s.
- any ``optuna.samplers.BaseSampler`` object (the Python API), used as the model-based ones.

Conditional parameters (``when``) are suggested define-by-run, so a configuration lacks a key
whose condition fails, under every sampler.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from faasml._imports import optional_import
from faasml._validate import shown
from faasml.exceptions import ConfigError
from faasml.searchspace import Choice, Distribution, IntUniform, LogUniform, SearchSpace, Uniform

SAMPLERS = ("random", "grid", "tpe", "gp")
"""The samplers a job file may name (``tuning.sampler``)."""

OPTIONS: Mapping[str, tuple[str, ...]] = {
    "random": (),
    "grid": ("grid_points",),
    "tpe": ("min_points", "n_ei_candidates", "multivariate", "constant_liar"),
    "gp": ("min_points",),
}
"""``tuning.sampler_options`` each sampler reads (the job's ``seed`` seeds every one)."""

GRID_POINTS = 3


def check_sampler(
    name: object, options: Mapping[str, Any] | None = None, where: str = "tuning.sampler"
) -> str:
    """``name`` when it names a sampler and ``options`` are its own; else one ConfigError line."""
    if not isinstance(name, str) or name not in SAMPLERS:
        raise ConfigError(
            f"the value of {where} is {shown(name)}, but must be one of: {', '.join(SAMPLERS)}"
        )
    for key, value in (options or {}).items():
        if key not in OPTIONS[name]:
            allowed = ", ".join(OPTIONS[name]) or "none"
            raise ConfigError(
                f"tuning.sampler_options has {shown(key)}, which sampler {name!r} does not read "
                f"(it reads: {allowed})"
            )
        if key in ("grid_points", "min_points", "n_ei_candidates") and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ConfigError(
                f"the value of tuning.sampler_options.{key} is {shown(value)}, but must be an "
                "integer >= 1"
            )
        if key in ("multivariate", "constant_liar") and not isinstance(value, bool):
            raise ConfigError(
                f"the value of tuning.sampler_options.{key} is {shown(value)}, but must be "
                "true or false"
            )
    return name


class ConfigSampler:
    """Draws configurations of ``space``; ``observe`` tells it what a configuration measured.

    ``sampler`` is a name of ``SAMPLERS`` or an Optuna sampler object. Deterministic: the
    same space, seed, observations (in any order) and ``start`` give the same draws, so a run
    that rebuilds it from its record draws again what it drew.
    """

    def __init__(
        self,
        space: SearchSpace,
        sampler: object = "random",
        seed: int = 0,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.space = space
        self.seed = int(seed)
        self.options = dict(options or {})
        if isinstance(sampler, str):
            self.name = check_sampler(sampler, self.options)
            self._object: Any = None
        else:
            optuna = _optuna()
            if not isinstance(sampler, optuna.samplers.BaseSampler):
                raise ConfigError(
                    f"the sampler is {shown(sampler)} ({type(sampler).__name__}), but must be one "
                    f"of: {', '.join(SAMPLERS)}, or an optuna.samplers.BaseSampler"
                )
            self.name, self._object = type(sampler).__name__, sampler
        self.min_points = int(self.options.get("min_points", len(space) + 3))
        self._results: dict[int, dict[str, tuple[dict[str, Any], float]]] = {}
        """Budget (epochs) -> configuration's key -> (configuration, value to minimise)."""

    @property
    def model_based(self) -> bool:
        """Whether what is observed changes what is drawn."""
        return self.name not in ("random", "grid")

    def observe(self, config: Mapping[str, Any], budget: int, value: float) -> None:
        """``config`` measured ``value`` (lower is better) after ``budget`` epochs; a value
        that is not finite (a diverged trial) tells nothing."""
        if math.isfinite(value):
            key = repr(sorted(config.items()))
            self._results.setdefault(int(budget), {})[key] = (dict(config), float(value))

    def results_at(self, budget: int) -> list[tuple[dict[str, Any], float]]:
        """The (configuration, value) pairs told at ``budget`` epochs."""
        return list(self._results.get(int(budget), {}).values())

    def model_budget(self) -> int | None:
        """The budget whose results the model is fitted on: the largest with ``min_points``."""
        enough = [b for b, seen in self._results.items() if len(seen) >= self.min_points]
        return max(enough) if enough else None

    def draw(self, n: int, start: int = 0) -> list[dict[str, Any]]:
        """Configurations ``start`` … ``start + n − 1`` (their index seeds the random ones)."""
        if self.name == "random":
            return [self.space.sample_one(self.seed, i) for i in range(start, start + n)]
        if self.name == "grid":
            grid = self.grid()
            return [dict(grid[i % len(grid)]) for i in range(start, start + n)]
        budget = self.model_budget()
        if budget is None:
            return [self.space.sample_one(self.seed, i) for i in range(start, start + n)]
        return self._ask(n, start, budget)

    def grid(self) -> list[dict[str, Any]]:
        """Every combination (conditional parameters only where their condition holds), in a
        seeded shuffled order."""
        points = int(self.options.get("grid_points", GRID_POINTS))
        combos: list[dict[str, Any]] = [{}]
        for name in self.space.order():
            values = _grid_values(self.space.params[name], points)
            grown: list[dict[str, Any]] = []
            for combo in combos:
                if self.space.active(name, combo):
                    grown.extend({**combo, name: value} for value in values)
                else:
                    grown.append(combo)
            combos = grown
        order = np.random.default_rng([self.seed & 0xFFFFFFFF, 0x6121D]).permutation(len(combos))
        return [{k: combos[i][k] for k in sorted(combos[i])} for i in order]

    def _ask(self, n: int, start: int, budget: int) -> list[dict[str, Any]]:
        """``n`` configurations asked of the Optuna sampler, on a study of ``budget``'s results."""
        optuna = _optuna()
        study = optuna.create_study(direction="minimize", sampler=self._sampler(start))
        dists = {name: _distribution(optuna, d) for name, d in self.space.params.items()}
        for _, (seen, value) in sorted(self._results[budget].items()):
            params = {k: _internal(self.space.params[k], v) for k, v in seen.items()}
            study.add_trial(
                optuna.trial.create_trial(
                    params=params, distributions={k: dists[k] for k in params}, value=value
                )
            )
        drawn = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's ExperimentalWarning
            for _ in range(n):
                trial = study.ask()
                config: dict[str, Any] = {}
                for name in self.space.order():
                    if self.space.active(name, config):
                        value = _suggest(trial, name, self.space.params[name])
                        config[name] = _external(self.space.params[name], value)
                drawn.append({k: config[k] for k in sorted(config)})
        return drawn

    def _sampler(self, start: int) -> Any:
        """The Optuna sampler, seeded by the job's seed and the first index drawn."""
        if self._object is not None:
            return self._object
        optuna = _optuna()
        seed = (self.seed * 1_000_003 + start) & 0xFFFFFFFF
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.name == "tpe":
                kwargs = {k: v for k, v in self.options.items() if k != "min_points"}
                kwargs.setdefault("constant_liar", True)  # a batch drawn at once spreads out
                return optuna.samplers.TPESampler(
                    seed=seed, n_startup_trials=self.min_points, **kwargs
                )
            if hasattr(optuna.samplers, "GPSampler"):
                return optuna.samplers.GPSampler(
                    seed=seed, n_startup_trials=self.min_points, warn_independent_sampling=False
                )
            raise ConfigError(  # pragma: no cover (Optuna >= 3.6 has GPSampler)
                "sampler 'gp' needs Optuna's GPSampler (Optuna >= 3.6); upgrade optuna"
            )


def _optuna() -> Any:
    optuna = optional_import("optuna", "search")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _distribution(optuna: Any, dist: Distribution) -> Any:
    """Optuna's distribution of a faasml one (a choice over its values' indices: values may be
    lists, which Optuna's categories cannot be)."""
    d = optuna.distributions
    if isinstance(dist, Uniform):
        return d.FloatDistribution(dist.low, dist.high)
    if isinstance(dist, LogUniform):
        return d.FloatDistribution(dist.low, dist.high, log=True)
    if isinstance(dist, IntUniform):
        return d.IntDistribution(dist.low, dist.high)
    return d.CategoricalDistribution(tuple(range(len(dist.values))))


def _suggest(trial: Any, name: str, dist: Distribution) -> Any:
    """``trial``'s suggestion for ``name`` (define-by-run: asked only where its condition holds)."""
    if isinstance(dist, Uniform):
        return trial.suggest_float(name, dist.low, dist.high)
    if isinstance(dist, LogUniform):
        return trial.suggest_float(name, dist.low, dist.high, log=True)
    if isinstance(dist, IntUniform):
        return trial.suggest_int(name, dist.low, dist.high)
    return trial.suggest_categorical(name, tuple(range(len(dist.values))))


def _internal(dist: Distribution, value: Any) -> Any:
    """A configuration's value as its Optuna parameter (a choice's index)."""
    return dist.values.index(value) if isinstance(dist, Choice) else value


def _external(dist: Distribution, value: Any) -> Any:
    """An Optuna parameter as the configuration's value."""
    if isinstance(dist, Choice):
        return copy.deepcopy(dist.values[int(value)])
    if isinstance(dist, IntUniform):
        return int(value)
    return float(value)


def _grid_values(dist: Distribution, points: int) -> list[Any]:
    """A distribution's grid: its choices, or ``points`` evenly spaced values with both ends
    (geometrically for loguniform, distinct integers for int)."""
    if isinstance(dist, Choice):
        return list(dist.values)
    if points == 1:
        middle = [(dist.low + dist.high) / 2]
        if isinstance(dist, LogUniform):
            middle = [math.sqrt(dist.low * dist.high)]
        return [round(middle[0])] if isinstance(dist, IntUniform) else middle
    if isinstance(dist, IntUniform):
        spaced = np.linspace(dist.low, dist.high, points)
        return sorted({round(float(v)) for v in spaced})
    if isinstance(dist, LogUniform):
        return [float(v) for v in np.geomspace(dist.low, dist.high, points)]
    return [float(v) for v in np.linspace(dist.low, dist.high, points)]


def grid_size(space: SearchSpace, points: int = GRID_POINTS) -> int:
    """How many configurations ``grid`` enumerates."""
    return len(ConfigSampler(space, "grid", options={"grid_points": points}).grid())


__all__ = ["GRID_POINTS", "OPTIONS", "SAMPLERS", "ConfigSampler", "check_sampler", "grid_size"]
