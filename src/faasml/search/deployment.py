"""Deployment search (SMLT §3.2): choose functions × memory (× storage) from measured probes.

``DeploymentSearch`` drives a searcher over a ``DeploymentSpace`` for a ``DeploymentGoal``
(``faasml.search.space``: the candidates and what the model says of them) with a caller's
``measure`` function (real billed probes in the runtime, model plus noise in the simulator)
and, when the job changes, ``retrigger`` starts a new search warm-started from the last
posterior.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

from faasml.exceptions import ConfigError
from faasml.search import SEARCHERS, SearchBudget, Searcher, check_choice, create_searcher
from faasml.search._base import Array
from faasml.search._gp import NOISE, GPEISearcher
from faasml.search.space import (
    COUNT_LEVELS,
    MEMORY_STEP_MB,
    PENALTY,
    DeploymentGoal,
    DeploymentSpace,
    ProbeFit,
    cpu_bound_sizes,
    features_of,
)
from faasml.types import Allocation

SEARCH_SHARE = 0.05
"""Default dollar budget of a search: this share of the job's predicted bill."""
SCALE_DRIFT = 0.1
"""Deviation added to each learnt log scale at a re-trigger (the change may move them)."""
MODEL_MARGIN = 1.5
"""A deployment no probe ran is chosen only if its memory holds the model's footprint (its
copies) this many times as large as the evidence says (the profile's, or more than a probe
that ran out of memory showed), unless a probe that ran showed at least as little to be
enough. A profile's data partition and runtime are known; its model footprint is estimated."""
REPEATS = 1
"""How many times a warm GP + EI search may measure one deployment (``GPEISearcher``)."""
OUT_OF_MEMORY = re.compile(r"out[ -]of[ -]memory|memoryerror", re.IGNORECASE)
"""A probe's failure that says the function ran out of memory (simulator, local platform)."""


@dataclass(frozen=True)
class Measurement:
    """What one probe measured: time and cost per epoch on the probed deployment (extrapolated
    from its few rounds) and what the probe itself took and cost ("search cost")."""

    time_s: float
    cost_usd: float
    probe_s: float = 0.0
    probe_usd: float = 0.0
    failed: str | None = None
    """Why the probe could not measure (e.g. out of memory): scored as a bad candidate."""


@dataclass(frozen=True)
class Probe:
    allocation: Allocation
    measurement: Measurement
    score: float
    predicted_time_s: float
    predicted_cost_usd: float
    rounds: float | None = None
    """The rounds of a shortened probe (``DeploymentSearch``'s ``probe_rounds``; below one,
    part of one round: ``round_parts``); None: the full probe."""


@dataclass(frozen=True)
class SearchResult:
    """One search: the probes in order, the choice, why it stopped, what it cost."""

    choice: Allocation
    choice_index: int
    probes: tuple[Probe, ...]
    stop_reason: str
    searcher: str
    warm: bool
    infeasible: bool = False
    """The search's own evidence says no deployment keeps the constraint
    (``DeploymentSearch.infeasible``): the choice is then the least violation, and the
    user's budget or deadline cannot be kept as far as the probes show."""

    @property
    def search_usd(self) -> float:
        return sum(p.measurement.probe_usd for p in self.probes)

    @property
    def search_s(self) -> float:
        return sum(p.measurement.probe_s for p in self.probes)

    def chosen_probe(self) -> Probe | None:
        return next((p for p in self.probes if p.allocation == self.choice), None)


Measure = Callable[[Allocation], Measurement]
"""A full probe of a deployment."""
MeasureRounds = Callable[[Allocation, int], Measurement]
"""A probe of a deployment that runs the given number of rounds (a shortened probe's fewer)."""
MeasureParts = Callable[[Allocation, float], Measurement]
"""A probe that runs the given rounds, or below one that part of one round (each function
trains that share of its rows, then the round's synchronisation): ``round_parts``."""


class DeploymentSearch:
    """One search over ``space`` for ``goal``: ``run(measure)`` probes until the searcher is
    done and returns the choice; ``retrigger`` starts the next one after a change."""

    def __init__(
        self,
        space: DeploymentSpace,
        goal: DeploymentGoal,
        *,
        searcher: str = "gp-ei",
        budget: SearchBudget | None = None,
        seed: int = 0,
        warm: bool = True,
        prior: Array | None = None,
        probe_costs: Array | None = None,
        scales: tuple[Array, Array] | None = None,
        model_floor: float = 0.0,
        choice: str = "likeliest",
        bill_share: float | None = None,
        repeats: int = REPEATS,
        probe_rounds: int | None = None,
        round_parts: int | None = None,
    ) -> None:
        """``warm`` uses the model's prediction as the prior mean (a profile exists), its
        terms' scales learnt from the probes (``scales``: their prior centre and deviation,
        a re-trigger's); an explicit ``prior`` (a re-trigger's learnt residual) is added to
        it when warm and replaces it when cold. ``probe_costs`` (the predicted price of each
        probe) keep the search within ``budget.max_usd``. ``model_floor``: the true job's
        model footprint is known to exceed this many times its profile's (a re-trigger's,
        from probes that ran out of memory before the change). ``choice``: GP + EI's rule
        for the recommendation once a probe was measured (``upper`` or ``likeliest``: the
        deployment most likely to keep the constraint and be within 5 % of the best; see
        ``GPEISearcher``); kept by its re-triggers. It applies to a warm GP + EI search (a
        cold one has no model terms to draw, so it chooses by ``upper``; the other searchers
        recommend their best measured candidate), and is checked whatever the searcher.
        ``bill_share``: after each probe, the search spends at most this share of the bill
        its posterior predicts for its choice (searchers with a posterior: GP + EI), besides
        ``budget.max_usd``; kept by its re-triggers. The search cost is then a share of the
        job's bill as the probes see it, not only of the model's prediction. ``repeats``:
        how many times a warm GP + EI search may measure one deployment (1: never again;
        ``GPEISearcher.unsettled``); kept by its re-triggers. ``probe_rounds``: the rounds
        of a full probe; given, probes are fitted to the dollars left (``ProbeFit``, see
        ``step``; ``probe_costs`` then unused); kept by its re-triggers. ``round_parts``
        (with ``probe_rounds``): where no candidate's probe of one round fits the dollars
        left, a probe runs part of one, in steps of 1 / ``round_parts`` (``ProbeFit``;
        ``measure`` is then a ``MeasureParts``); kept by its re-triggers."""
        self.choice = check_choice(choice)
        if round_parts is not None and probe_rounds is None:
            raise ConfigError("round_parts needs probe_rounds: part rounds fit a probe's dollars")
        self.fit = (
            None if probe_rounds is None else ProbeFit(space, probe_rounds, parts=round_parts)
        )
        probe_costs = probe_costs if self.fit is None else self.fit.shortest
        self.repeats = repeats
        self.space, self.goal = space, goal
        self.name = searcher
        self.budget = budget or SearchBudget()
        self.warm = warm or prior is not None
        self.latent = bool(getattr(SEARCHERS.get(searcher), "uses_prior", False))
        """A model-based searcher learns log time per epoch (the model's error), and scores
        it through the goal with the candidate's price per second; the others see the score."""
        model: dict[str, Array | str | int] = {}
        self.prior: Array | None
        if warm and self.latent:
            model["terms"] = space.terms()
            model["choice"] = choice
            model["repeats"] = repeats
            if scales is not None:
                model["center"], model["term_sd"] = scales
            self.prior = space.log_time() + (0.0 if prior is None else prior)
        else:
            if prior is None and warm:
                prior = space.log_time()
            self.prior = prior
        self.searcher: Searcher = create_searcher(
            searcher,
            space.features,
            self.budget,
            seed=seed,
            prior=prior,
            objective=goal.latent(space.cost_per_s()) if self.latent else None,
            costs=probe_costs,
            **model,
        )
        self.probes: list[Probe] = []
        self._rows: list[int] = []
        self.model_floor = model_floor
        if bill_share is not None and not (math.isfinite(bill_share) and bill_share > 0):
            raise ConfigError(f"the value of bill_share is {bill_share}, but must be positive")
        self.bill_share = bill_share
        self._restrict_memory()

    def _limit_spend(self) -> None:
        """With ``bill_share``: after each probe, the search may spend at most that share of
        the bill its posterior now predicts for its choice (``goal.epochs`` epochs at the
        posterior's time per epoch, the candidate's price per second, and its start)."""
        posterior = getattr(self.searcher, "posterior", None)
        if self.bill_share is None or posterior is None or not self.searcher.observed:
            return
        mean, _ = posterior()
        choice = self.searcher.best()
        epoch_usd = math.exp(float(mean[choice])) * float(self.space.cost_per_s()[choice])
        bill = self.goal.epochs * epoch_usd + float(self.space.table.startup_usd[choice])
        if math.isfinite(bill) and bill > 0:
            self.searcher.limit_usd(self.bill_share * bill)

    def _restrict_memory(self) -> None:
        """What the probes say of the true job's memory (``MODEL_MARGIN``): a probe that ran
        out of memory at model room r shows the true footprint is more than r × the
        profile's, so no candidate with room <= r is proposed or chosen (that one, every
        smaller memory, and fewer functions, whose partitions are larger); a probe that ran
        at room r shows r is enough. A candidate no probe ran is chosen only with room of
        ``MODEL_MARGIN`` × the larger of 1 and the first bound, or at least the least room a
        probe ran at."""
        room = self.space.model_room()
        if room is None:
            return
        ran = [
            float(room[i])
            for i, p in zip(self._rows, self.probes, strict=True)
            if p.measurement.failed is None
        ]
        for i, p in zip(self._rows, self.probes, strict=True):
            failed = p.measurement.failed
            if failed is not None and OUT_OF_MEMORY.search(failed):
                self.model_floor = max(self.model_floor, float(room[i]))
        enough = min(min(ran, default=math.inf), MODEL_MARGIN * max(1.0, self.model_floor))
        self.searcher.restrict(room > self.model_floor, room >= enough)

    def step(self, measure: Measure | MeasureRounds | MeasureParts) -> Probe | None:
        """Propose, measure and observe one candidate; None when the searcher is done.
        ``measure`` is a ``Measure``, or a ``MeasureRounds`` when the search fits its probes
        (``probe_rounds``): a candidate whose full probe does not fit the dollars left is
        then probed with the rounds that fit (at least one; with ``round_parts``, where no
        candidate's one round fits, the parts of one that fit) and observed with the larger
        noise of fewer rounds."""
        index = self.searcher.propose()
        if index is None and self._to_parts():
            index = self.searcher.propose()
        if index is None:
            return None
        allocation = self.space.allocation(index)
        if self.fit is None:
            return self.record(allocation, cast(Measure, measure)(allocation))
        left = self.searcher.max_usd()
        rounds = self.fit.rounds(index, None if left is None else left - self.searcher.spent_usd)
        if self.fit.parts is None:
            measured = cast(MeasureRounds, measure)(allocation, int(rounds))
        else:
            measured = cast(MeasureParts, measure)(allocation, rounds)
        return self.record(allocation, measured, rounds)

    def _to_parts(self) -> bool:
        """With ``round_parts``: where the searcher stopped because no candidate's probe of
        one round fits the dollars left, it goes on with the price of a part-round probe
        (``ProbeFit.parts_price``); True when it may propose again."""
        fit, searcher = self.fit, self.searcher
        if fit is None or fit.parts is None or searcher.costs is fit.parts_price:
            return False
        reason = searcher.stop_reason or ""
        if not reason.startswith(("no probe fits", "no probe left fits")):
            return False
        searcher.costs, searcher.stop_reason = fit.parts_price, None
        return True

    def record(
        self, allocation: Allocation, measured: Measurement, rounds: float | None = None
    ) -> Probe:
        """Observe what a probe of ``allocation`` measured (``rounds``: how many it ran, where
        the search fits its probes): ``step``'s second half, and how a resumed run replays
        the probes its record holds (nothing is measured again)."""
        index = self.space.index_of(allocation)
        if index is None:
            raise ConfigError(f"{allocation} is not a candidate of this search")
        short = noise = None
        if self.fit is not None and (short := self.fit.shortened(index, rounds)) is not None:
            # Fewer rounds average out less of the noise: the GP weighs this one less.
            noise = float(getattr(self.searcher, "noise", NOISE)) * self.fit.noise_factor(
                index, short
            )
        if measured.failed is not None:
            worst = max((p.score for p in self.probes if p.measurement.failed is None), default=0)
            score = float(worst) + 2.0
        else:
            score = float(self.goal.score(measured.time_s, measured.cost_usd))
        if self.latent:
            slowest = max(
                (
                    math.log(p.measurement.time_s)
                    for p in self.probes
                    if p.measurement.failed is None
                ),
                default=float(self.space.log_time()[index]),
            )
            value = math.log(measured.time_s) if measured.failed is None else slowest + 2.0
        else:
            value = score
        self.searcher.observe(index, value, measured.probe_usd, noise)
        probe = Probe(
            allocation,
            measured,
            score,
            float(self.space.table.time_s[index]),
            float(self.space.table.cost_usd[index]),
            short,
        )
        self.probes.append(probe)
        self._rows.append(index)
        self._restrict_memory()
        self._limit_spend()
        return probe

    def run(self, measure: Measure) -> SearchResult:
        while self.step(measure) is not None:
            pass
        return self.result()

    def result(self) -> SearchResult:
        reason = self.searcher.stop_reason or "stopped by the caller"
        if self.searcher.observed:
            index = self.searcher.best()
        else:  # nothing measured: the model's choice, and the reason says so
            index = self.model_choice()
            if "the model's choice" not in reason:
                reason += ": the model's choice, unmeasured"
        return SearchResult(
            choice=self.space.allocation(index),
            choice_index=index,
            probes=tuple(self.probes),
            stop_reason=reason,
            searcher=self.name,
            warm=self.warm,
            infeasible=self.infeasible(),
        )

    def model_choice(self) -> int:
        """The analytical model's own choice (no probe): its best score among the candidates
        the search may recommend (the warm GP + EI's prior choice, for every searcher)."""
        if self.latent and self.warm and isinstance(self.searcher, GPEISearcher):
            return self.searcher.best()
        score = np.where(self.searcher.eligible(), self.space.prior(self.goal), np.inf)
        return int(np.argmin(score))

    def infeasible(self) -> bool:
        """The search's verdict that no deployment keeps the constraint. With a posterior
        (GP + EI): no candidate it may recommend has a posterior mean of log time per epoch
        within the constraint's limit (``GPEISearcher.keeps_none``); otherwise (and before
        any probe of a warm search, from the model alone): no probe that ran measured a time
        and cost per epoch that keep it (``DeploymentGoal.keeps``). No constraint: False."""
        if self.goal.limit is None:
            return False
        keeps_none = getattr(self.searcher, "keeps_none", None)
        if keeps_none is not None:
            return bool(keeps_none())
        return not any(
            self.goal.keeps(p.measurement.time_s, p.measurement.cost_usd)
            for p in self.probes
            if p.measurement.failed is None
        )

    def retrigger(
        self,
        space: DeploymentSpace,
        goal: DeploymentGoal,
        *,
        budget: SearchBudget | None = None,
        seed: int = 0,
        warm: bool = True,
        probe_costs: Array | None = None,
    ) -> DeploymentSearch:
        """The search after a change: the new model's prediction (when ``warm``: its terms
        with the scales the last search learnt) plus what the last GP learnt of the model's
        remaining error, as the new prior mean; few probes."""
        residual = getattr(self.searcher, "residual", None)
        scales = getattr(self.searcher, "scales", lambda: None)()
        prior: Array | None = None  # a searcher without a model: warm from the model alone
        if residual is not None:
            # Warm, added to the new model's terms; cold, the prior mean itself.
            prior, _ = residual(space.features)
        if scales is not None:
            theta, sd = scales
            # What the last search learnt of the scales, a little looser: the job changed.
            scales = (theta, np.sqrt(sd**2 + SCALE_DRIFT**2))
        return DeploymentSearch(
            space,
            goal,
            searcher=self.name,
            budget=budget or SearchBudget(max_probes=3, ei_threshold=self.budget.ei_threshold),
            seed=seed,
            warm=warm,
            prior=prior,
            probe_costs=probe_costs,
            scales=scales if warm else None,
            model_floor=self.model_floor,
            choice=self.choice,
            bill_share=self.bill_share,
            repeats=self.repeats,
            probe_rounds=None if self.fit is None else self.fit.full_rounds,
            round_parts=None if self.fit is None else self.fit.parts,
        )


__all__ = [
    "COUNT_LEVELS",
    "MEMORY_STEP_MB",
    "MODEL_MARGIN",
    "OUT_OF_MEMORY",
    "PENALTY",
    "REPEATS",
    "SCALE_DRIFT",
    "SEARCH_SHARE",
    "DeploymentGoal",
    "DeploymentSearch",
    "DeploymentSpace",
    "Measure",
    "MeasureParts",
    "MeasureRounds",
    "Measurement",
    "Probe",
    "ProbeFit",
    "SearchResult",
    "cpu_bound_sizes",
    "features_of",
]
