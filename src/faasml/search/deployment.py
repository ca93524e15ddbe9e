"""Deployment search (SMLT §3.2): choose functions × memory (× storage) from measured probes.

``DeploymentSpace`` is the candidate set with the analytical model's per-epoch estimates
(CE-scaling eqs. 1–5, ``models.space.evaluate``) — the prior mean where a profile exists and
the feasibility rules always. ``DeploymentGoal`` turns a measured time and cost per epoch into
the scalar the searcher minimises (SMLT eq. 1 and its dual). ``DeploymentSearch`` drives a
searcher with a caller's ``measure`` function (real billed probes in the runtime, model plus
noise in the simulator) and, when the job changes, ``retrigger`` starts a new search
warm-started from the last posterior.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.space import AllocationTable, Exclusions, evaluate
from faasml.search import SEARCHERS, SearchBudget, Searcher, check_choice, create_searcher
from faasml.search._base import Array
from faasml.search._gp import GPEISearcher, LatentObjective
from faasml.types import Allocation, Constraint, Objective
from faasml.workload import Workload

SEARCH_SHARE = 0.05
"""Default dollar budget of a search: this share of the job's predicted bill."""
PENALTY = 10.0
"""Slope of the score past the constraint, per unit of log overshoot: steep enough that a
candidate over the limit never beats one within it by more than a sliver."""
COUNT_LEVELS = 64
"""Function counts searched: about this many, spaced geometrically from 1 to the most."""
SCALE_DRIFT = 0.1
"""Deviation added to each learnt log scale at a re-trigger (the change may move them)."""
MEMORY_STEP_MB = 128
"""Memory grid of the search (SMLT §3.2 searches 128 MB steps)."""
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
class DeploymentGoal:
    """Minimise time per epoch within a budget, or cost per epoch within a deadline (SMLT
    eq. 1 and its dual), over ``epochs`` epochs. The score is log(primary) plus ``PENALTY`` ×
    the log overshoot of the other quantity past its limit: smooth for the GP, and equal to
    log(primary) for every candidate that keeps the constraint."""

    objective: Objective
    epochs: float
    limit: float | None = None
    """The budget (USD, MIN_TIME) or deadline (s, MIN_COST) for ``epochs`` epochs."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epochs) and self.epochs > 0):
            raise ConfigError(f"the value of epochs is {self.epochs}, but must be positive")

    @staticmethod
    def from_constraint(constraint: Constraint, epochs: float) -> DeploymentGoal:
        goal = constraint.goal
        limit = constraint.budget_usd if goal is Objective.MIN_TIME else constraint.deadline_s
        return DeploymentGoal(goal, epochs, limit)

    def score(self, time_s: Array | float, cost_usd: Array | float) -> Array:
        time = np.maximum(np.asarray(time_s, dtype=float), 1e-12)
        cost = np.maximum(np.asarray(cost_usd, dtype=float), 1e-15)
        primary, secondary = (time, cost) if self.objective is Objective.MIN_TIME else (cost, time)
        value: Array = np.log(primary)
        if self.limit is not None:
            over = np.log(self.epochs * secondary / self.limit)
            value = value + PENALTY * np.maximum(over, 0.0)
        return value

    def latent(self, cost_per_s: Array) -> LatentObjective:
        """The goal on log time per epoch g, with each candidate's dollars per second of
        epoch: least time → objective g, kept iff g <= log(budget / (epochs · $/s)); least
        cost → objective g + log($/s), kept iff g <= log(deadline / epochs)."""
        rate = np.maximum(np.asarray(cost_per_s, dtype=float), 1e-300)
        inf = np.full(rate.shape, np.inf)
        if self.objective is Objective.MIN_TIME:
            offset = np.zeros(rate.shape)
            limit = inf if self.limit is None else np.log(self.limit / (self.epochs * rate))
        else:
            offset = np.log(rate)
            limit = (
                inf
                if self.limit is None
                else np.full(rate.shape, math.log(self.limit / self.epochs))
            )
        return LatentObjective(offset, limit)

    def keeps(self, time_s: float, cost_usd: float) -> bool:
        """True when ``epochs`` epochs at this time and cost keep the constraint."""
        if self.limit is None:
            return True
        other = cost_usd if self.objective is Objective.MIN_TIME else time_s
        return self.epochs * other <= self.limit * (1 + 1e-9)


def cpu_bound_sizes(
    memories: NDArray[np.int64], workload: Workload, catalog: Catalog
) -> NDArray[np.int64]:
    """``memories`` without the sizes above the first that buys the platform's largest CPU
    share (``max_vcpus``: on the local platform, the machine's cores): such a function runs
    no faster and bills more — dominated, a probe of it is money spent on noise. Kept all where
    the job needs more memory than that size (one function's footprint)."""
    platform = catalog.platform
    full = memories[platform.vcpus(memories) >= platform.max_vcpus - 1e-9]
    if full.size == 0 or float(workload.memory_needed_mb(1)) > float(full[0]):
        return memories
    return memories[memories <= full[0]]


@dataclass(frozen=True)
class DeploymentSpace:
    """The candidates (n on a geometric grid, memory in ``MEMORY_STEP_MB`` steps, every
    storage and scheme of the catalog) with the model's estimates and the searcher's features:
    log n and log m scaled by the catalog's bounds (the same for every phase of a job, so a
    posterior carries over), plus one indicator per storage option where there are several."""

    table: AllocationTable
    features: Array
    workload_rounds: NDArray[np.int64]
    """Rounds per epoch of each candidate (k of the model)."""
    exclusions: Exclusions = field(default_factory=Exclusions)
    footprint: Array | None = None
    """Per candidate, the memory the profile says a function needs (MB): apart from the
    model (runtime and data partition, row 0) and the model's copies (row 1)."""

    def __len__(self) -> int:
        return len(self.table)

    @staticmethod
    def build(
        workload: Workload,
        catalog: Catalog,
        *,
        memory_step_mb: int | None = None,
        max_functions: int | None = None,
        counts: list[int] | None = None,
    ) -> DeploymentSpace:
        platform = catalog.platform
        step = memory_step_mb or max(platform.memory_step_mb, MEMORY_STEP_MB)
        memories = cpu_bound_sizes(platform.memory_sizes(step), workload, catalog)
        top = int(platform.max_concurrent(memories).max())
        if max_functions is not None:
            top = min(top, max_functions)
        top = max(1, min(top, workload.max_functions))
        if counts is None:
            grid = np.unique(np.round(np.geomspace(1, top, COUNT_LEVELS)).astype(np.int64))
        else:
            grid = np.array(sorted({c for c in counts if 1 <= c <= top}), dtype=np.int64)
            if grid.size == 0:
                raise ConfigError(f"no function count in {counts} is between 1 and {top}")
        options = catalog.sync_options()
        out = Exclusions()
        parts = [
            evaluate(
                workload,
                catalog,
                (grid if index == 0 else grid[grid > 1])[:, None],
                memories[None, :],
                *option,
                exclusions=out,
            )
            for index, option in enumerate(options)
        ]
        table = AllocationTable.concatenate(parts, options)
        if len(table) == 0:
            reasons = "; ".join(f"{k} ({v})" for k, v in out.counts.most_common())
            raise ConfigError(f"no deployment of {catalog.name} can run {workload.name}: {reasons}")
        rounds = workload.iterations_per_epoch(table.n)
        footprint = np.stack(
            [
                workload.memory_needed_mb(table.n) - workload.model_copies * workload.model_mb,
                np.full(len(table), workload.model_copies * workload.model_mb),
            ]
        )
        return DeploymentSpace(table, features_of(table, catalog), rounds, out, footprint)

    def model_room(self) -> Array | None:
        """How many times the profile's model footprint each candidate's memory holds beside
        the runtime and its data partition (>= 1 where the profile says it fits; inf with
        no model footprint); None when the space does not know its footprint."""
        if self.footprint is None:
            return None
        rest, model = self.footprint
        free = self.table.memory_mb - rest
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(model > 0, free / np.where(model > 0, model, 1.0), np.inf)
        result: Array = np.where(free < 0, 0.0, room)
        return result

    def prior(self, goal: DeploymentGoal) -> Array:
        """The model's score of every candidate."""
        return goal.score(self.table.time_s, self.table.cost_usd)

    def predicted_bill(self, goal: DeploymentGoal) -> float:
        """The model's cost of ``goal.epochs`` epochs on its own best candidate."""
        best = int(np.argmin(self.prior(goal)))
        return float(goal.epochs * self.table.cost_usd[best] + self.table.startup_usd[best])

    def log_time(self) -> Array:
        """log of the model's time per epoch: the GP's prior mean when warm-started."""
        result: Array = np.log(np.maximum(self.table.time_s, 1e-12))
        return result

    def terms(self) -> Array:
        """The model's time per epoch as terms (computation, synchronisation, the rest: load
        and invocation), whose sum is the time: the scales a search learns from its probes."""
        t = self.table
        result: Array = np.stack([t.compute_s, t.sync_s, t.load_s + t.invoke_s])
        return result

    def probe_cost(self, rounds: int = 5, cap_s: float = 10.0) -> Array:
        """The model's price of probing each candidate: its cold start plus ``rounds`` rounds
        (at most ``cap_s`` seconds of them, at least one)."""
        table = self.table
        k = self.workload_rounds.astype(float)
        per_round = table.time_s / np.maximum(k, 1.0)
        ran = np.minimum(np.minimum(rounds, k), np.maximum(1.0, np.floor(cap_s / per_round)))
        result: Array = table.startup_usd + ran / np.maximum(k, 1.0) * table.cost_usd
        return result

    def cost_per_s(self) -> Array:
        """Dollars per second of epoch of each candidate (its functions' prices and requests,
        as the model prices them): what turns a measured time into a cost."""
        result: Array = self.table.cost_usd / np.maximum(self.table.time_s, 1e-12)
        return result

    def allocation(self, index: int) -> Allocation:
        return self.table.allocation(index)

    def index_of(self, allocation: Allocation) -> int | None:
        """The candidate of ``allocation``, or None when it is not in the space."""
        option = self.table.options.index((allocation.storage, allocation.scheme))
        rows = np.flatnonzero(
            (self.table.n == allocation.n)
            & (self.table.memory_mb == allocation.memory_mb)
            & (self.table.option == option)
        )
        return int(rows[0]) if rows.size else None


def features_of(table: AllocationTable, catalog: Catalog) -> Array:
    """[log n / log N, log(m / m_min) / log(m_max / m_min), one-hot option (if several)]."""
    platform = catalog.platform
    most = max(platform.concurrency_limit, 2)
    n = np.log(table.n.astype(float)) / math.log(most)
    low, high = float(platform.memory_min_mb), float(max(platform.memory_max_mb, 2 * 128))
    m = np.log(table.memory_mb / low) / math.log(high / low)
    columns = [n, m]
    if len(table.options) > 1:
        columns += [(table.option == k).astype(float) for k in range(len(table.options))]
    return np.clip(np.stack(columns, axis=1), 0.0, 1.0)


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
        ``GPEISearcher.unsettled``); kept by its re-triggers."""
        self.choice = check_choice(choice)
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

    def step(self, measure: Measure) -> Probe | None:
        """Propose, measure and observe one candidate; None when the searcher is done."""
        index = self.searcher.propose()
        if index is None:
            return None
        allocation = self.space.allocation(index)
        return self.record(allocation, measure(allocation))

    def record(self, allocation: Allocation, measured: Measurement) -> Probe:
        """Observe what a probe of ``allocation`` measured: ``step``'s second half, and how a
        resumed run replays the probes its record holds (nothing is measured again)."""
        index = self.space.index_of(allocation)
        if index is None:
            raise ConfigError(f"{allocation} is not a candidate of this search")
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
        self.searcher.observe(index, value, measured.probe_usd)
        probe = Probe(
            allocation,
            measured,
            score,
            float(self.space.table.time_s[index]),
            float(self.space.table.cost_usd[index]),
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
        )
