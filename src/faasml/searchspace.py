"""Hyperparameter search spaces: named distributions and seeded sampling of N configurations.

A job file writes one distribution per hyperparameter::

    search_space:
      optimizer.lr: {loguniform: [0.001, 1.0]}
      optimizer.momentum: {uniform: [0.0, 0.95]}
      batch_size: {int: [32, 256]}
      model.hidden: {choice: [[32], [64, 64]]}
      optimizer.name: {choice: [sgd, adam]}
      optimizer.momentum: {uniform: [0.0, 0.99], when: {optimizer.name: sgd}}

``when`` makes a parameter conditional: it is drawn only where every named ``choice``
parameter took the value given; elsewhere the configuration lacks the key.
``SearchSpace.sample(n, seed)`` draws n configurations at random; the same (space, n, seed)
always gives the same list, and configuration i does not depend on n (a larger tuning run
extends a smaller one's trials). ``faasml.samplers`` draws them by other rules (grid, TPE, GP).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faasml._validate import shown
from faasml.exceptions import ConfigError


@dataclass(frozen=True)
class Uniform:
    """A float drawn uniformly from [low, high]."""

    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> float:
        return float(rng.uniform(self.low, self.high))

    def extremes(self) -> tuple[Any, ...]:
        return (self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"uniform": [self.low, self.high]}


@dataclass(frozen=True)
class LogUniform:
    """A float whose logarithm is uniform in [log low, log high] (low > 0)."""

    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> float:
        value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return min(max(value, self.low), self.high)

    def extremes(self) -> tuple[Any, ...]:
        return (self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"loguniform": [self.low, self.high]}


@dataclass(frozen=True)
class IntUniform:
    """An integer drawn uniformly from low..high, both included."""

    low: int
    high: int

    def sample(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.low, self.high + 1))

    def extremes(self) -> tuple[Any, ...]:
        return (self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"int": [self.low, self.high]}


@dataclass(frozen=True)
class Choice:
    """One of the listed values, each equally likely (values may be lists, e.g. layer widths)."""

    values: tuple[Any, ...]

    def sample(self, rng: np.random.Generator) -> Any:
        return copy.deepcopy(self.values[int(rng.integers(len(self.values)))])

    def extremes(self) -> tuple[Any, ...]:
        return self.values

    def to_dict(self) -> dict[str, Any]:
        # Scalars need no deep copy: a job is re-validated once per choice (each is checked to
        # make a valid job), and each check writes the job out again, this list with it.
        if all(value is None or isinstance(value, _SCALARS) for value in self.values):
            return {"choice": list(self.values)}
        return {"choice": copy.deepcopy(list(self.values))}


_SCALARS = (bool, int, float, str)

Distribution = Uniform | LogUniform | IntUniform | Choice
KINDS = ("uniform", "loguniform", "int", "choice")

MAX_CHOICES = 1_000
"""Most values a ``choice`` may list: each one is checked to make a valid job before a run
starts, and a search samples only a few dozen trials; a range of integers is an ``int``."""


@dataclass(frozen=True)
class SearchSpace:
    """Hyperparameter name (a job-file path such as ``optimizer.lr``) -> distribution."""

    params: Mapping[str, Distribution]
    conditions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Conditional parameter -> {choice parameter: the value it needs} (``when``)."""

    def __len__(self) -> int:
        return len(self.params)

    def sample(self, n: int, seed: int) -> list[dict[str, Any]]:
        """``n`` seeded configurations; configuration i depends only on (space, seed, i)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(f"the value of n is {shown(n)}, but must be an integer >= 0")
        return [self.sample_one(seed, index) for index in range(n)]

    def sample_one(self, seed: int, index: int) -> dict[str, Any]:
        """Configuration ``index`` of ``sample``: every parameter drawn in name order (so a
        condition never shifts another's draw), then those whose condition fails dropped."""
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x5EA7C4, index])
        drawn = {name: self.params[name].sample(rng) for name in sorted(self.params)}
        config: dict[str, Any] = {}
        for name in self.order():
            if self.active(name, config):
                config[name] = drawn[name]
        return {name: config[name] for name in sorted(config)}

    def active(self, name: str, config: Mapping[str, Any]) -> bool:
        """Whether ``name`` is drawn given the parameters drawn before it (``order``)."""
        needs = self.conditions.get(name, {})
        return all(parent in config and config[parent] == value for parent, value in needs.items())

    def order(self) -> list[str]:
        """Parameter names, each after the parameters its condition names (then by name)."""
        return sorted(self.params, key=lambda name: (self._depth(name), name))

    def _depth(self, name: str) -> int:
        parents = self.conditions.get(name, {})
        return 1 + max((self._depth(p) for p in parents), default=-1)

    def to_dict(self) -> dict[str, Any]:
        data = {name: dist.to_dict() for name, dist in self.params.items()}
        for name, needs in self.conditions.items():
            data[name]["when"] = copy.deepcopy(dict(needs))
        return data


def parse_distribution(data: object, where: str) -> Distribution:
    """One distribution: ``{uniform|loguniform|int: [low, high]}`` or ``{choice: [...]}``."""
    if not isinstance(data, Mapping) or len(data) != 1:
        raise ConfigError(
            f"the value of {where} is {shown(data)}, but must be a mapping with one of "
            f"{', '.join(KINDS)} (e.g. {{loguniform: [0.001, 1.0]}})"
        )
    ((kind, args),) = data.items()
    if kind not in KINDS:
        raise ConfigError(
            f"{where} has distribution {shown(kind)}; choose one of: {', '.join(KINDS)}"
        )
    here = f"{where}.{kind}"
    if kind == "choice":
        if not isinstance(args, list) or not args:
            raise ConfigError(f"the value of {here} is {shown(args)}, but must be a non-empty list")
        if len(args) > MAX_CHOICES:
            raise ConfigError(
                f"the value of {here} lists {len(args):,} values, but a choice may list at most "
                f"{MAX_CHOICES:,} (for a range of integers use {{int: [low, high]}})"
            )
        return Choice(tuple(args))
    if not isinstance(args, list) or len(args) != 2:
        raise ConfigError(f"the value of {here} is {shown(args)}, but must be a list [low, high]")
    low, high = args
    if kind == "int":
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (low, high)):
            raise ConfigError(
                f"the value of {here} is {shown(args)}, but both bounds must be integers"
            )
        if low > high:
            raise ConfigError(f"the value of {here} is {shown(args)}, but must have low <= high")
        return IntUniform(low, high)
    if any(
        isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
        for v in (low, high)
    ):
        raise ConfigError(f"the value of {here} is {shown(args)}, but both bounds must be numbers")
    if low >= high:
        raise ConfigError(f"the value of {here} is {shown(args)}, but must have low < high")
    if kind == "loguniform":
        if low <= 0:
            raise ConfigError(f"the value of {here} is {shown(args)}, but must have low > 0")
        return LogUniform(float(low), float(high))
    return Uniform(float(low), float(high))


def parse_search_space(data: object, where: str = "search_space") -> SearchSpace:
    """A mapping of hyperparameter paths to distributions, as a job file writes it."""
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(
            f"the value of {where} is {shown(data)}, but must be a non-empty mapping of "
            "hyperparameter names to distributions"
        )
    params: dict[str, Distribution] = {}
    whens: dict[str, object] = {}
    for name, spec in data.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where} has a key {shown(name)}; keys must be non-empty strings")
        if isinstance(spec, Mapping) and "when" in spec:
            whens[name] = spec["when"]
            spec = {key: value for key, value in spec.items() if key != "when"}
        params[name] = parse_distribution(spec, f"{where}.{name}")
    conditions = {
        name: _condition(needs, params, f"{where}.{name}.when") for name, needs in whens.items()
    }
    space = SearchSpace(params, conditions)
    for name in conditions:
        _check_acyclic(space, name, f"{where}.{name}.when")
    return space


def _condition(needs: object, params: Mapping[str, Distribution], where: str) -> dict[str, Any]:
    """``{choice parameter: one of its values, ...}``, each named when it is not."""
    if not isinstance(needs, Mapping) or not needs:
        raise ConfigError(
            f"the value of {where} is {shown(needs)}, but must be a mapping of a choice "
            "parameter to one of its values (e.g. {optimizer.name: sgd})"
        )
    for parent, value in needs.items():
        dist = params.get(parent) if isinstance(parent, str) else None
        if not isinstance(dist, Choice):
            choices = [n for n, d in params.items() if isinstance(d, Choice)]
            raise ConfigError(
                f"{where} names {shown(parent)}, but a condition must name a choice parameter "
                f"of the search space ({', '.join(choices) or 'none'})"
            )
        if value not in dist.values:
            raise ConfigError(
                f"the value of {where}.{parent} is {shown(value)}, but must be one of "
                f"{shown(list(dist.values))}"
            )
    return dict(needs)


def _check_acyclic(space: SearchSpace, name: str, where: str) -> None:
    """A ConfigError where following ``name``'s conditions comes back to it."""
    seen, todo = {name}, list(space.conditions.get(name, {}))
    while todo:
        parent = todo.pop()
        if parent == name:
            raise ConfigError(f"{where} makes {name!r} depend on itself; conditions may not loop")
        if parent not in seen:
            seen.add(parent)
            todo.extend(space.conditions.get(parent, {}))
