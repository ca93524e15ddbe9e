"""The searcher contract: propose a candidate, observe its measured value, say when done.

A searcher works over a finite set of candidates given as a feature matrix (one row per
candidate, each feature scaled to [0, 1]); it minimises a scalar the caller measures. It never
measures anything itself: the caller (the simulator, or the runtime's billed probes) does, so
every searcher is pure and deterministic for a seed. Not thread-safe: one caller drives it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import ConfigError

Array = NDArray[np.float64]

CHOICES = ("likeliest", "upper")
"""The rules GP + EI's recommendation may follow once a probe was measured (``GPEISearcher``'s
``choice``): the deployment most likely to keep the constraint and be within 5 % of the best,
or the lowest upper bound of the objective among those whose posterior mean keeps it."""


def check_choice(choice: object, where: str = "the choice rule") -> str:
    """``choice`` if it names one of ``CHOICES``; else a ``ConfigError`` naming it."""
    if not isinstance(choice, str) or choice not in CHOICES:
        raise ConfigError(f"{where} is {choice!r}, but must be one of: {', '.join(CHOICES)}")
    return choice


@dataclass(frozen=True)
class SearchBudget:
    """When a search stops: ``max_probes`` measurements, ``max_usd`` spent on them, or (for
    searchers with an acquisition function) the best expected improvement below
    ``ei_threshold`` after at least ``min_probes``."""

    max_probes: int = 10
    max_usd: float | None = None
    ei_threshold: float = 0.01
    """In the objective's units (the deployment objective is a log: 0.01 ≈ 1 %)."""
    min_probes: int = 1

    def __post_init__(self) -> None:
        if self.max_probes < 1:
            raise ConfigError(
                f"the value of max_probes is {self.max_probes}, but must be max_probes >= 1"
            )
        if self.min_probes < 1 or self.min_probes > self.max_probes:
            raise ConfigError(
                f"the value of min_probes is {self.min_probes}, but must be between 1 and "
                f"max_probes ({self.max_probes})"
            )
        if self.max_usd is not None and not (math.isfinite(self.max_usd) and self.max_usd > 0):
            raise ConfigError(f"the value of max_usd is {self.max_usd}, but must be positive")
        if not (math.isfinite(self.ei_threshold) and self.ei_threshold >= 0):
            raise ConfigError(f"the value of ei_threshold is {self.ei_threshold}, but must be >= 0")


class Searcher(ABC):
    """Minimise a measured value over candidates: ``propose`` → measure → ``observe``, until
    ``done``. ``best`` is the recommendation at any point after the first observation.

    Invariants: ``propose`` never returns a candidate already observed (re-measuring is the
    caller's choice; GP + EI with ``repeats`` > 1 is the one exception, see
    ``GPEISearcher.unsettled``), and returns None once ``done``; ``stop_reason`` says why it
    is done.
    """

    def __init__(
        self,
        features: Array,
        budget: SearchBudget,
        seed: int = 0,
        *,
        costs: Array | None = None,
    ) -> None:
        """``costs``: the predicted price of measuring each candidate; with a dollar budget, a
        candidate whose probe would not fit what is left of it is never proposed."""
        x = np.asarray(features, dtype=float)
        if x.ndim != 2 or x.shape[0] == 0:
            raise ConfigError(
                f"a searcher needs at least one candidate; got features of shape {x.shape}"
            )
        self.features = x
        if costs is not None:
            costs = np.asarray(costs, dtype=float)
            if costs.shape != (x.shape[0],):
                raise ConfigError(
                    f"costs needs one value per candidate ({x.shape[0]}); got shape {costs.shape}"
                )
        self.costs = costs
        self.budget = budget
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.observed: list[tuple[int, float]] = []
        self.noises: list[float | None] = []
        """Per observation, its own deviation (None: the searcher's usual)."""
        self.spent_usd = 0.0
        self.stop_reason: str | None = None
        self.allowed = np.ones(x.shape[0], dtype=bool)
        """Candidates that may be proposed (and recommended): see ``restrict``."""
        self.choosable = np.ones(x.shape[0], dtype=bool)
        """Candidates that may be recommended without a measurement of their own."""
        self.cap_usd: float | None = None
        """A dollar cap the caller learnt as the search went (``limit_usd``)."""

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def observe(
        self, index: int, value: float, cost_usd: float = 0.0, noise: float | None = None
    ) -> None:
        """Record the measured ``value`` of candidate ``index`` and what measuring it cost;
        ``noise``: this measurement's deviation where it differs from the usual (a shorter
        probe's is larger; the searchers with a noise model weigh it by that, the others
        ignore it)."""
        if not 0 <= index < len(self):
            raise ConfigError(f"candidate {index} is not among the {len(self)} candidates")
        if not math.isfinite(value):
            raise ConfigError(f"the measured value of candidate {index} is {value}, not finite")
        if noise is not None and not (math.isfinite(noise) and noise > 0):
            raise ConfigError(f"the value of noise is {noise}, but must be positive")
        self.observed.append((int(index), float(value)))
        self.noises.append(noise)
        self.spent_usd += float(cost_usd)
        self._after_observe()

    def restrict(
        self,
        propose: NDArray[np.bool_] | None = None,
        choose: NDArray[np.bool_] | None = None,
    ) -> None:
        """What the caller's evidence rules out (replacing an earlier call's): a candidate
        whose ``propose`` is False is never proposed, and not recommended while another
        may be (e.g. a deployment a failed probe showed to be too small; see
        :meth:`eligible` and :meth:`best` for when nothing else may); one whose ``choose``
        is False is recommended only once measured (e.g. one whose memory no probe has
        shown to be enough). None: every candidate."""
        masks = []
        for mask in (propose, choose):
            if mask is None:
                masks.append(np.ones(len(self), dtype=bool))
                continue
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (len(self),):
                raise ConfigError(
                    f"a restriction needs one flag per candidate ({len(self)}); "
                    f"got shape {mask.shape}"
                )
            masks.append(mask.copy())
        self.allowed, self.choosable = masks

    def limit_usd(self, cap_usd: float | None) -> None:
        """What the caller learnt of the dollars this search may spend (replacing an earlier
        call's): at most ``cap_usd`` (e.g. a share of the bill the probes now predict), and
        never more than ``budget.max_usd``. None: the budget's dollars."""
        if cap_usd is not None and not (math.isfinite(cap_usd) and cap_usd > 0):
            raise ConfigError(f"the value of cap_usd is {cap_usd}, but must be positive")
        self.cap_usd = cap_usd

    def max_usd(self) -> float | None:
        """The dollars this search may spend: the budget's, or the tighter ``cap_usd``."""
        caps = [c for c in (self.budget.max_usd, self.cap_usd) if c is not None]
        return min(caps) if caps else None

    def eligible(self) -> NDArray[np.bool_]:
        """Candidates a recommendation may name: allowed, and choosable or measured; every
        allowed one when none is, every candidate when none is allowed (a recommendation is
        always given, so it may then name one the evidence ruled out, e.g. a deployment a
        probe showed runs out of memory)."""
        measured = self._measured()
        for mask in (self.allowed & (self.choosable | measured), self.allowed):
            if mask.any():
                return mask
        return np.ones(len(self), dtype=bool)

    def _after_observe(self) -> None:  # noqa: B027 (a hook, empty by default)
        """Hook for searchers that refit a model after each observation."""

    def done(self) -> bool:
        """True once the budget (count or dollars) is spent, every candidate is measured, or
        the searcher's own stopping rule holds; ``stop_reason`` then says which."""
        if self.stop_reason is not None:
            return True
        count = len(self.observed)
        if count >= self.budget.max_probes:
            self.stop_reason = f"probe budget spent ({count} probes)"
        elif (cap := self.max_usd()) is not None and self.spent_usd >= cap:
            self.stop_reason = f"search budget spent (${self.spent_usd:.6f} of ${cap:.6f})"
        elif len(self.tried()) >= len(self):
            self.stop_reason = "every candidate measured"
        elif self.untried().size == 0 and not (self.allowed & ~self._measured()).any():
            self.stop_reason = "no candidate left that the evidence allows"
        elif self.untried().size == 0 and count == 0 and self.costs is not None:
            cheapest = float(self.costs[self.allowed].min()) if self.allowed.any() else math.inf
            self.stop_reason = (
                f"no probe fits the search budget (${self.max_usd():.6g}; the cheapest probe "
                f"costs ${cheapest:.6g})"
            )
        elif self.untried().size == 0:
            self.stop_reason = (
                f"no probe left fits the search budget (${self.spent_usd:.6f} of "
                f"${self.max_usd():.6f} spent)"
            )
        else:
            self.stop_reason = self._own_stop()
        return self.stop_reason is not None

    def _own_stop(self) -> str | None:
        return None

    def propose(self) -> int | None:
        """The next candidate to measure, or None when done."""
        if self.done():
            return None
        return self._propose()

    @abstractmethod
    def _propose(self) -> int: ...

    def tried(self) -> set[int]:
        return {index for index, _ in self.observed}

    def _measured(self) -> NDArray[np.bool_]:
        mask = np.zeros(len(self), dtype=bool)
        mask[list(self.tried())] = True
        return mask

    def untried(self) -> NDArray[np.int64]:
        """Candidates not measured yet whose probe fits what is left of the dollar budget."""
        mask = np.ones(len(self), dtype=bool)
        mask[list(self.tried())] = False
        mask &= self.allowed
        cap = self.max_usd()
        if self.costs is not None and cap is not None:
            mask &= self.costs <= cap - self.spent_usd
        return np.flatnonzero(mask)

    def best(self) -> int:
        """The recommended candidate: the lowest mean measured value (a repeat averages)
        among the allowed measured candidates, or among all measured ones when none of them
        is allowed (so it may be one a probe showed runs out of memory)."""
        if not self.observed:
            raise ConfigError("no candidate has been measured yet")
        sums: dict[int, list[float]] = {}
        for index, value in self.observed:
            sums.setdefault(index, []).append(value)
        if any(self.allowed[i] for i in sums):
            sums = {i: v for i, v in sums.items() if self.allowed[i]}
        return min(sums, key=lambda i: (sum(sums[i]) / len(sums[i]), i))
