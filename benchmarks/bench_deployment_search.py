"""Deployment search (SMLT §3.2) in the simulator: GP + EI against TPE (Optuna's), random,
grid and the model-based planner, and re-triggering after a change of the job.

Each instance is a shipped workload profile on the AWS Lambda catalog (S3 for
synchronisation, both schemes), a constraint (a budget of 1.5 × the cheapest run → least time;
or a deadline of 1.5 × the fastest run → least cost), and a *true* job that differs from its
profile (``sim.deployment.perturbed_workload``: computation ×0.6–1.6 with a memory tilt, model
×0.7–1.4). A probe measures the truth with 5 % lognormal noise and is billed (cold start plus
up to 5 rounds, at most 10 s of them); every searcher has the same budget: 10 probes and 5 %
of the job's predicted bill (and, for a searcher with a posterior, 5 % of the bill it predicts
for its choice after each probe: ``DeploymentSearch``'s ``bill_share``; ``--no-bill-share``:
without it). The exhaustive optimum is the best candidate of the noiseless
truth that keeps the constraint. "Within 5 %": the choice's true objective is within 5 % of
the optimum's and it keeps the constraint within the measurement noise (5 %); "strict": it
keeps the constraint exactly.

Prints: 1. per searcher: share of instances within 5 % when it stops, probes until within 5 %
(median, p90), probes used, search cost as a share of the job's bill; 2. GP + EI (warm) per
profile; 3. re-triggers after a change (batch size ×4, model ×2, data ×2), warm-started from
the last posterior with at most 3 probes.

"feas." counts only the instances where some deployment of the true job keeps the constraint.
Where none keeps it exactly, the right answer is "it cannot be kept": such an instance counts as
within (and strict) when the search says so (``SearchResult.infeasible``; the model planner:
``InfeasibleConstraintError``), and otherwise as within only when its choice keeps the
constraint within the noise and is within 5 % of the best that does (the optimum then).

4. where GP + EI (warm) misses: each miss in one class (``sim.search_misses``), listed one
by one with ``--explain`` (with the choice and the optimum, and the posterior's time per
epoch at each as a ratio to the truth's); how many choices break the user's constraint (by more
than the 5 % noise, and at all: each is a miss of "strict", the first also of "within"); the
bound on any search whose choice must be a deployment it probed
(``sim.search_misses.probed_bound``: instances where a good deployment's probe fits the budget;
the GP + EI search may choose unprobed deployments, so its share may pass it); and the
what-if ``hybrid_reach`` (within, or a good deployment's probe fits: not a bound).

Run: .venv/bin/python benchmarks/bench_deployment_search.py [--seeds 5] [--probes 10]
[--first-seed 0] [--only-warm] [--explain] [--choice likeliest|upper] [--no-bill-share]
[--repeats N] [--full-probes] [--round-parts N] [--ceiling] [--law scaled|other] [--first-only]
[--profiles NAME ...]

A probe is fitted to the dollars left (issue 33): a candidate whose full probe (5 rounds) does
not fit is probed with as many rounds as fit, at least one, its noise √(5 / rounds) times a
full probe's; "a good deployment's probe fits" then means its one-round probe does. Where no
candidate's one-round probe fits, the search probes part of one round in eighths (each
function trains that share of its rows, then the round's synchronisation), its noise
√(5 / part) times (``--round-parts N``: steps of 1 / N; 0: whole rounds only).
``--full-probes``: every probe full, as before.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import InfeasibleConstraintError
from faasml.planners.training import plan_training
from faasml.search import SearchBudget
from faasml.search.deployment import (
    REPEATS,
    SEARCH_SHARE,
    DeploymentGoal,
    DeploymentSearch,
    DeploymentSpace,
    ProbeFit,
)
from faasml.sim.deployment import TrueLandscape, other_law_workload, perturbed_workload
from faasml.sim.search_misses import (
    PICK,
    REASONS,
    hybrid_reach,
    probe_fits,
    probed_bound,
    why_missed,
)
from faasml.types import Constraint, Objective
from faasml.workload import Workload, builtin_workloads, load_workload

PROBE_ROUNDS = 5
"""Rounds of a full probe (``TrueLandscape.probe_rounds``); a search fits shorter ones to
its dollars (``DeploymentSearch``'s ``probe_rounds``) unless ``--full-probes``."""
ROUND_PARTS = 8
"""Where no candidate's one round fits, a probe runs part of one, in eighths
(``DeploymentSearch``'s ``round_parts``; ``--round-parts``)."""
SEARCHERS = (
    ("gp-ei", True),
    ("gp-ei", False),
    ("tpe", False),
    ("random", False),
    ("grid", False),
)


def _bigger_model(w: Workload) -> Workload:
    compute = dataclasses.replace(
        w.compute,
        seconds_per_mb_1vcpu=w.compute.seconds_per_mb_1vcpu * 2,
        points=tuple((m, s * 2) for m, s in w.compute.points),
    )
    return dataclasses.replace(w, model_mb=w.model_mb * 2, compute=compute)


CHANGES: dict[str, Callable[[Workload], Workload]] = {
    "batch size x4": lambda w: dataclasses.replace(w, batch_size=min(w.batch_size * 4, w.samples)),
    "model x2 (NAS)": _bigger_model,
    "data x2 (online)": lambda w: dataclasses.replace(
        w, samples=w.samples * 2, dataset_mb=w.dataset_mb * 2
    ),
}


@dataclass
class Outcome:
    feasible: bool
    """Some deployment of the truth keeps the constraint (else no optimum to be within)."""
    within: bool
    strict: bool
    first: int | None
    probes: int
    search_share: float
    why: str | None = None
    """Why it missed (``sim.search_misses.REASONS``), None for a hit."""
    where: str = ""
    """Which instance (profile, constraint, seed) and, for a miss, what the truth held."""
    fits: bool = False
    """Some good deployment's probe fits the search's dollar budget."""
    broken: bool = False
    """The choice breaks the constraint (truth, exactly)."""
    over: bool = False
    """The choice breaks the constraint by more than the noise (a miss of "within" too)."""
    measured: bool = False
    """A probe of this search measured the choice."""
    said_infeasible: bool = False
    """The search's verdict: no deployment keeps the constraint (``SearchResult.infeasible``)."""
    predicted_over: bool = False
    """The search's own posterior says its choice breaks the constraint by more than the
    noise, and it did not say the constraint cannot be kept."""
    unprobed: bool = False
    """No probe fitted the search's dollars: the model's choice, unmeasured."""
    fits_short: tuple[bool, bool] = (False, False)
    """Some good deployment's probe would fit the budget if shortened to one round, and with
    no round at all (its start alone): what a shorter probe could reach."""


@dataclass
class Truth:
    """The noiseless time and cost per epoch of every candidate, and the optimum."""

    time_s: np.ndarray
    cost: np.ndarray
    goal: DeploymentGoal
    best: float = field(init=False)

    def __post_init__(self) -> None:
        kept = np.isfinite(self.primary)
        if self.goal.limit is not None:
            kept &= self.secondary <= self.goal.limit
        self.best = float(self.primary[kept].min()) if kept.any() else float("inf")

    @property
    def primary(self) -> np.ndarray:
        return self.time_s if self.goal.objective is Objective.MIN_TIME else self.cost

    @property
    def secondary(self) -> np.ndarray:
        other = self.cost if self.goal.objective is Objective.MIN_TIME else self.time_s
        return other * self.goal.epochs

    def top(self, tolerance: float) -> float:
        """The optimum a choice is judged against: the best that keeps the constraint
        exactly, or, where none does, the best that keeps it within ``tolerance`` (inf
        where none does either)."""
        if math.isfinite(self.best) or self.goal.limit is None:
            return self.best
        kept = np.isfinite(self.primary) & (self.secondary <= self.goal.limit * (1 + tolerance))
        return float(self.primary[kept].min()) if kept.any() else float("inf")

    def good(self, tolerance: float) -> np.ndarray:
        """``within`` of every candidate."""
        limit = self.goal.limit
        kept = np.ones(len(self.time_s), dtype=bool)
        if limit is not None:
            kept = self.secondary <= limit * (1 + tolerance)
        return np.asarray(kept & (self.primary <= 1.05 * self.top(tolerance)))

    def breaks(self, index: int, tolerance: float) -> bool:
        """The candidate's true budget or deadline use exceeds the limit × (1 + tolerance)
        (a candidate that cannot run at all breaks it too)."""
        limit = self.goal.limit
        if not np.isfinite(self.primary[index]):
            return True
        return limit is not None and bool(self.secondary[index] > limit * (1 + tolerance))

    def within(self, index: int, tolerance: float, best: float | None = None) -> bool:
        """Primary within 5 % of the optimum's (``top``), the constraint kept within
        ``tolerance``."""
        limit = self.goal.limit
        kept = limit is None or self.secondary[index] <= limit * (1 + tolerance)
        top = self.top(tolerance) if best is None else best
        return bool(kept and self.primary[index] <= 1.05 * top)

    def judged(self, index: int, tolerance: float, says_infeasible: bool) -> bool:
        """``within``, or, where no deployment keeps the constraint exactly, the search's
        verdict that none does: the right answer there is "cannot be kept"."""
        if says_infeasible and not math.isfinite(self.best):
            return True
        return self.within(index, tolerance)


def true_of(truth: TrueLandscape, space: DeploymentSpace, goal: DeploymentGoal) -> Truth:
    time_s, cost = truth.exact(space)
    return Truth(time_s, cost, goal)


def run_search(
    search: DeploymentSearch, truth: TrueLandscape, exact: Truth, where: str = ""
) -> Outcome:
    first = None
    while search.step(truth.measure) is not None:
        if first is None and exact.judged(search.searcher.best(), truth.noise, search.infeasible()):
            first = len(search.probes)
    result = search.result()
    index = result.choice_index
    train = exact.goal.epochs * float(exact.cost[index])
    share = result.search_usd / (train + result.search_usd) if math.isfinite(train) else 1.0
    good = exact.good(truth.noise)
    searcher = search.searcher
    budget_usd = searcher.budget.max_usd
    hit = exact.judged(index, truth.noise, result.infeasible)
    why = (
        None
        if hit
        else why_missed(
            good,
            index,
            searcher.tried(),
            feasible=math.isfinite(exact.best),
            stop_reason=result.stop_reason,
            prices=searcher.costs,
            max_usd=searcher.budget.max_usd,
        )
    )
    if why is not None:
        cheapest = (
            float(searcher.costs[good].min() / searcher.budget.max_usd)
            if searcher.costs is not None and searcher.budget.max_usd and good.any()
            else float("nan")
        )
        spent = searcher.spent_usd / (searcher.budget.max_usd or 1.0)
        if why == PICK:
            probed = [i for i in searcher.tried() if good[i]]
            strict = sum(exact.within(i, 0.0) for i in probed)
            where += f"| {len(probed)} good probed, {strict} kept strictly; "
        else:
            where += "| "
        where += (
            f"{int(good.sum())} good, cheapest probe {cheapest:.2f}x budget; "
            f"{len(result.probes)} probes spent {spent:.2f}x"
        )
        if exact.goal.limit is not None and np.isfinite(exact.secondary[index]):
            use = float(exact.secondary[index]) / exact.goal.limit
            kind = "budget" if exact.goal.objective is Objective.MIN_TIME else "deadline"
            where += f"; the choice uses {use:.2f}x the {kind}"
        where += extrapolation(search, exact, index)
    return Outcome(
        math.isfinite(exact.best),
        hit,
        exact.judged(index, 0.0, result.infeasible),
        first,
        len(result.probes),
        share,
        why,
        where,
        probe_fits(good, prices=searcher.costs, max_usd=searcher.budget.max_usd),
        exact.breaks(index, 0.0),
        exact.breaks(index, truth.noise),
        index in searcher.tried(),
        result.infeasible,
        predicted_over(search, index, truth.noise) and not result.infeasible,
        not result.probes,
        (
            probe_fits(good, prices=search.space.probe_cost(rounds=1), max_usd=budget_usd),
            probe_fits(good, prices=search.space.table.startup_usd, max_usd=budget_usd),
        ),
    )


def predicted_over(search: DeploymentSearch, index: int, noise: float) -> bool:
    """The searcher's posterior mean at its choice breaks the constraint by more than the
    noise (searchers with a posterior: GP + EI; before any probe, the model's prior)."""
    posterior = getattr(search.searcher, "posterior", None)
    goal = getattr(search.searcher, "goal", None)
    if posterior is None or goal is None:
        return False
    mean, _ = posterior()
    return bool(mean[index] > goal.limit[index] + noise)


def extrapolation(search: DeploymentSearch, exact: Truth, index: int) -> str:
    """The choice and the optimum (n × MB, probed or not) and, where the searcher has a
    posterior, its time per epoch at each as a ratio to the truth's (1.00: exact)."""
    kept = np.isfinite(exact.primary)
    if exact.goal.limit is not None:
        kept &= exact.secondary <= exact.goal.limit
    if not kept.any():
        return ""
    best = int(np.flatnonzero(kept)[np.argmin(exact.primary[kept])])
    tried = search.searcher.tried()
    posterior = getattr(search.searcher, "posterior", None)
    mean = posterior()[0] if posterior is not None else None
    parts = []
    for label, row in (("choice", index), ("optimum", best)):
        a = search.space.allocation(row)
        text = f"{label} {a.n}x{a.memory_mb}MB{'*' if row in tried else ''}"
        if mean is not None and np.isfinite(exact.time_s[row]):
            text += f" t {math.exp(float(mean[row])) / float(exact.time_s[row]):.2f}"
        parts.append(text)
    return "\n    " + "; ".join(parts) + " (*: probed; t: posterior / true time)"


def true_job(nominal: Workload, catalog: Catalog, seed: int, law: str) -> TrueLandscape:
    """The instance's true job: its profile perturbed, or of another compute law."""
    rng = np.random.default_rng(seed)
    if law == "other":
        true, straggle = other_law_workload(nominal, rng)
        return TrueLandscape(true, catalog, seed=seed, straggle=straggle)
    return TrueLandscape(perturbed_workload(nominal, rng), catalog, seed=seed)


def constraints(workload: Workload, space: DeploymentSpace) -> list[Constraint]:
    """A budget of 1.5 × the cheapest run, and a deadline of 1.5 × the fastest (model)."""
    epochs = workload.epochs
    return [
        Constraint(budget_usd=1.5 * epochs * float(space.table.cost_usd.min())),
        Constraint(deadline_s=1.5 * epochs * float(space.table.time_s.min())),
    ]


def calibration_ceiling(
    space: DeploymentSpace, goal: DeploymentGoal, exact: Truth, max_usd: float, noise: float
) -> bool:
    """Some deployment whose one-round probe fits ``max_usd``, measured without noise and
    used to scale the model's computation term exactly to it, makes the model's choice within
    5 % (chosen in hindsight: what calibrating the job's speed from one affordable probe can
    reach at best, not a bound on every search)."""
    terms = space.terms()
    affordable = np.flatnonzero(ProbeFit(space, PROBE_ROUNDS).shortest <= max_usd)
    for row in affordable:
        if not np.isfinite(exact.time_s[row]) or terms[0, row] <= 0:
            continue
        scale = max((exact.time_s[row] - terms[1, row] - terms[2, row]) / terms[0, row], 1e-3)
        time_s = scale * terms[0] + terms[1] + terms[2]
        choice = int(np.argmin(goal.score(time_s, time_s * space.cost_per_s())))
        if exact.judged(choice, noise, False):
            return True
    return False


def planner_within(
    workload: Workload,
    truth: TrueLandscape,
    catalog: Catalog,
    constraint: Constraint,
    exact: Truth,
) -> tuple[bool, bool]:
    """The model-based planner's choice (``plan_training``, no probe), judged on the truth."""
    try:
        plan = plan_training(workload, catalog, constraint, memory_step_mb=128)
    except InfeasibleConstraintError:
        # The planner's verdict "cannot be kept": right where no deployment keeps it.
        feasible = math.isfinite(exact.best)
        return not feasible, not feasible
    a = plan.choice.allocation
    option = (a.storage, a.scheme)
    time_s, cost, _, _ = truth.truth(np.array([a.n]), np.array([a.memory_mb]), option)
    if not np.isfinite(time_s[0]):
        return False, False
    one = Truth(time_s, cost, exact.goal)
    return (
        one.within(0, truth.noise, exact.top(truth.noise)),
        one.within(0, 0.0, exact.top(0.0)),
    )


def issue_figures(first: list[Outcome], per_profile: dict[str, list[Outcome]]) -> None:
    """Issue 33's figures for the warm GP + EI search's first searches."""
    count = len(first)
    rest = [o for name, v in per_profile.items() if not name.startswith("windsr") for o in v]
    shares = [o.search_share for o in first]
    print("\n== 0. First searches, GP + EI (warm), at most the probes given")
    print(
        f"within 5 % of the optimum: {sum(o.within for o in first)}/{count} "
        f"({sum(o.within for o in first) / max(count, 1):.0%}); without WindSR "
        f"{sum(o.within for o in rest)}/{len(rest)} "
        f"({sum(o.within for o in rest) / max(len(rest), 1):.0%})"
    )
    print(
        f"search cost, share of the job's bill: median {percentile(shares, 50):.1%}, "
        f"p90 {percentile(shares, 90):.2%}"
    )
    print(
        f"choice breaks the constraint (truth): {sum(o.broken for o in first)}, by more "
        f"than the noise {sum(o.over for o in first)}; its own posterior said so beyond the "
        f"noise {sum(o.predicted_over for o in first)}"
    )
    print(
        f"no probe fitted the search's dollars (the model's choice, unmeasured): "
        f"{sum(o.unprobed for o in first)}"
    )


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def firsts(outcomes: list[Outcome], cap: int) -> str:
    """Median and p90 of probes until within 5 % (never within: counted as cap + 1)."""
    counts = [o.first if o.first is not None else cap + 1 for o in outcomes]

    def show(v: float) -> str:
        return f">{cap}" if v > cap else f"{v:.0f}"

    return f"{show(percentile(counts, 50)):>4} {show(percentile(counts, 90)):>5}"


def summary(outcomes: list[Outcome]) -> tuple[float, float, float, float, float, float]:
    count = len(outcomes)
    shares = [o.search_share for o in outcomes]
    feasible = [o for o in outcomes if o.feasible]
    return (
        sum(o.within for o in outcomes) / count,
        sum(o.within for o in feasible) / max(len(feasible), 1),
        sum(o.strict for o in outcomes) / count,
        statistics.mean(o.probes for o in outcomes),
        percentile(shares, 50),
        percentile(shares, 90),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--threshold", type=float, default=0.01)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1"
    )
    parser.add_argument(
        "--only-warm", action="store_true", help="GP + EI warm and its re-triggers only"
    )
    parser.add_argument(
        "--explain", action="store_true", help="list every miss of GP + EI (warm) and why"
    )
    parser.add_argument(
        "--choice",
        choices=("upper", "likeliest"),
        default="likeliest",
        help="GP + EI (warm)'s rule for its choice (see faasml.search.GPEISearcher)",
    )
    parser.add_argument(
        "--no-bill-share",
        action="store_true",
        help="no dollar cap that follows the posterior's bill (the rule before issue 13's "
        "third pass: 5 %% of the model's predicted bill only)",
    )
    parser.add_argument(
        "--first-only", action="store_true", help="no re-triggers (the first search only)"
    )
    parser.add_argument(
        "--law",
        choices=("scaled", "other"),
        default="scaled",
        help="the true jobs: the profile perturbed (scaled), or computation of another law "
        "than the model's (other: sim.deployment.other_law_workload, stragglers)",
    )
    parser.add_argument(
        "--full-probes",
        action="store_true",
        help="every probe full (the rule before issue 33): no probe fitted to the dollars left",
    )
    parser.add_argument(
        "--round-parts",
        type=int,
        default=ROUND_PARTS,
        help="where not even one round fits, a probe runs part of one in steps of 1 / this "
        "(0: no probe shorter than one round, the rule before part-round probes)",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="also: what one affordable probe, calibrating the model's computation exactly "
        "(no noise, chosen in hindsight), makes of the model's choice",
    )
    parser.add_argument("--profiles", nargs="*", default=None, help="only these workload profiles")
    parser.add_argument(
        "--repeats",
        type=int,
        default=REPEATS,
        help="how many times GP + EI (warm) may measure one deployment (1: never again; "
        "see GPEISearcher.unsettled)",
    )
    args = parser.parse_args()
    searchers = SEARCHERS[:1] if args.only_warm else SEARCHERS
    catalog = load_catalog("aws-lambda").restricted_to(["s3"])
    began = time.monotonic()
    results: dict[str, list[Outcome]] = defaultdict(list)
    per_profile: dict[str, list[Outcome]] = defaultdict(list)
    retriggers: dict[str, list[Outcome]] = defaultdict(list)
    planner: list[tuple[bool, bool]] = []
    ceiling: dict[str, list[bool]] = defaultdict(list)
    constraint_names = ("budget", "deadline")
    names = [n for n in builtin_workloads() if args.profiles is None or n in args.profiles]
    for name in names:
        nominal = load_workload(name)
        space = DeploymentSpace.build(nominal, catalog)
        for which, constraint in enumerate(constraints(nominal, space)):
            goal = DeploymentGoal.from_constraint(constraint, nominal.epochs)
            budget = SearchBudget(
                max_probes=args.probes,
                ei_threshold=args.threshold,
                max_usd=SEARCH_SHARE * space.predicted_bill(goal),
            )
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                truth = true_job(nominal, catalog, seed, args.law)
                exact = true_of(truth, space, goal)
                planner.append(planner_within(nominal, truth, catalog, constraint, exact))
                if args.ceiling:
                    assert budget.max_usd is not None
                    ceiling[name].append(
                        calibration_ceiling(space, goal, exact, budget.max_usd, truth.noise)
                    )
                last = None
                for searcher, warm in searchers:
                    search = DeploymentSearch(
                        space,
                        goal,
                        searcher=searcher,
                        budget=budget,
                        seed=seed,
                        warm=warm,
                        probe_costs=space.probe_cost(),
                        choice=args.choice,
                        bill_share=None if args.no_bill_share else SEARCH_SHARE,
                        repeats=args.repeats,
                        probe_rounds=None if args.full_probes else PROBE_ROUNDS,
                        round_parts=None if args.full_probes else args.round_parts or None,
                    )
                    where = f"{name} {constraint_names[which]} seed {seed}"
                    outcome = run_search(search, truth, exact, where)
                    results[f"{searcher} ({'warm' if warm else 'cold'})"].append(outcome)
                    if searcher == "gp-ei" and warm:
                        per_profile[name].append(outcome)
                        last = search
                assert last is not None
                for change, apply in () if args.first_only else CHANGES.items():
                    changed = apply(nominal)
                    new_space = DeploymentSpace.build(changed, catalog)
                    new_truth = true_job(changed, catalog, seed, args.law)
                    new_truth.rng = np.random.default_rng(seed + 1000)
                    # The phase's constraint as tight as the job's (1.5 × its cheapest or fastest).
                    new_constraint = constraints(changed, new_space)[which]
                    new_goal = DeploymentGoal.from_constraint(new_constraint, changed.epochs)
                    again = last.retrigger(
                        new_space,
                        new_goal,
                        budget=SearchBudget(
                            max_probes=3,
                            ei_threshold=args.threshold,
                            max_usd=SEARCH_SHARE * new_space.predicted_bill(new_goal),
                        ),
                        seed=seed,
                        probe_costs=new_space.probe_cost(),
                    )
                    new_exact = true_of(new_truth, new_space, new_goal)
                    retriggers[change].append(
                        run_search(again, new_truth, new_exact, f"{where}, {change}")
                    )
    count = len(planner)
    infeasible = sum(not o.feasible for o in results["gp-ei (warm)"])
    parts = f", to part of a round (steps of 1/{args.round_parts})"
    print(
        f"{count} instances: {len(names)} profiles × 2 constraints × "
        f"{args.seeds} seeds (from {args.first_seed}); AWS Lambda + S3; noise 5 %; "
        f"budget {args.probes} probes and "
        f"{SEARCH_SHARE:.0%} of the predicted bill"
        f"{'' if args.no_bill_share else ' (and of the posterior bill after each probe)'}; "
        f"EI threshold {args.threshold:g}; "
        f"GP + EI's choice: {args.choice}; repeats {args.repeats}; "
        f"{'full probes only' if args.full_probes else 'probes fitted to the dollars left'}"
        f"{'' if args.full_probes or not args.round_parts else parts}"
    )
    print(
        f"'feas.': within, of the {count - infeasible} instances where some deployment of "
        f"the true job keeps the constraint ({infeasible} where none does)"
    )
    issue_figures(results["gp-ei (warm)"], per_profile)
    print("\n== 1. Within 5 % of the exhaustive optimum")
    print(f"{'searcher':<14} {'within':>6} {'feas.':>6} {'strict':>6} {'to 5%: med':>10} ", end="")
    print(f"{'p90':>4} ", end="")
    print(f"{'probes':>6} {'search cost: med':>16} {'p90':>5}")
    cap = args.probes
    for label, outcomes in results.items():
        within, feasible, strict, used, med, p90 = summary(outcomes)
        print(
            f"{label:<14} {within:>6.0%} {feasible:>6.0%} {strict:>6.0%} "
            f"{firsts(outcomes, cap):>15} "
            f"{used:>6.1f} {med:>16.1%} {p90:>5.1%}"
        )
    ok = sum(p[0] for p in planner) / count
    ok_strict = sum(p[1] for p in planner) / count
    print(f"{'model planner':<14} {ok:>6.0%} {'':>6} {ok_strict:>6.0%} ", end="")
    print(f"{'(no probe)':>15} {0:>6.1f}")
    print("\n== 2. GP + EI (warm) per profile")
    print(f"{'profile':<18} {'within':>6} {'feas.':>6} {'strict':>6} ", end="")
    print(f"{'to 5%: med':>10} {'p90':>4} ", end="")
    print(f"{'probes':>6} {'search cost':>11} {'p90':>5}")
    for name, outcomes in per_profile.items():
        within, feasible, strict, used, med, p90 = summary(outcomes)
        print(
            f"{name:<18} {within:>6.0%} {feasible:>6.0%} {strict:>6.0%} "
            f"{firsts(outcomes, cap):>15} "
            f"{used:>6.1f} {med:>11.1%} {p90:>5.1%}"
        )
    print("\n== 3. Re-trigger after a change (warm from the last posterior, at most 3 probes)")
    print(f"{'change':<18} {'within':>6} {'feas.':>6} {'strict':>6} ", end="")
    print(f"{'to 5%: med':>10} {'p90':>4} ", end="")
    print(f"{'probes':>6} {'search cost':>11} {'p90':>5}")
    for change, outcomes in retriggers.items():
        within, feasible, strict, used, med, p90 = summary(outcomes)
        print(
            f"{change:<18} {within:>6.0%} {feasible:>6.0%} {strict:>6.0%} "
            f"{firsts(outcomes, 3):>15} "
            f"{used:>6.1f} {med:>11.1%} {p90:>5.1%}"
        )
    print("\n== 4. Where GP + EI (warm) misses: each miss in one class")
    columns = {"first": results["gp-ei (warm)"]}
    for change, outcomes in retriggers.items():
        columns[change.split(" (")[0].replace("size ", "")] = outcomes
    print("(columns: the first search, then the re-triggers)")
    print(f"{'class':<44}" + "".join(f"{label:>9}" for label in columns))
    for reason in REASONS:
        counts = [sum(o.why == reason for o in outcomes) for outcomes in columns.values()]
        print(f"{reason:<44}" + "".join(f"{c:>9}" for c in counts))
    hits = [sum(o.why is None for o in outcomes) for outcomes in columns.values()]
    print(f"{'(within 5 %)':<44}" + "".join(f"{c:>9}" for c in hits))
    fits = [sum(o.fits for o in outcomes) for outcomes in columns.values()]
    label = "(a good deployment's probe fits the budget)"
    print(f"{label:<44}" + "".join(f"{c:>9}" for c in fits))
    measured = [sum(o.measured for o in outcomes) for outcomes in columns.values()]
    label = "(choice measured by a probe of the search)"
    print(f"{label:<44}" + "".join(f"{c:>9}" for c in measured))
    broken = [sum(o.broken for o in outcomes) for outcomes in columns.values()]
    over = [sum(o.over for o in outcomes) for outcomes in columns.values()]
    none = [sum(not o.feasible for o in outcomes) for outcomes in columns.values()]
    label = "(no deployment keeps the constraint)"
    print(f"{label:<44}" + "".join(f"{c:>9}" for c in none))
    said = [
        sum(o.said_infeasible and not o.feasible for o in outcomes) for outcomes in columns.values()
    ]
    label = "(  of which the search said so: hits)"
    print(f"{label:<44}" + "".join(f"{c:>9}" for c in said))
    false = [
        sum(o.said_infeasible and o.feasible for o in outcomes) for outcomes in columns.values()
    ]
    label = "(said none keeps it where one does)"
    print(f"{label:<44}" + "".join(f"{c:>9}" for c in false))
    label = "(choice breaks the constraint, at all)"
    print(f"{label:<44}" + "".join(f"{c:>9}" for c in broken))
    label = "(choice breaks it by more than the noise)"
    print(f"{label:<44}" + "".join(f"{c:>9}" for c in over))
    reach = [hybrid_reach([o.within for o in v], [o.fits for o in v]) for v in columns.values()]
    label = "(within, or a good deployment's probe fits)"
    print(f"{label:<44}" + "".join(f"{top:>9.0%}" for top in reach))
    bound = [probed_bound([o.fits for o in v]) for v in columns.values()]
    for k, label in enumerate(("(  ... its 1-round probe fits)", "(  ... its start alone fits)")):
        short = [sum(o.fits_short[k] for o in v) for v in columns.values()]
        print(f"{label:<44}" + "".join(f"{c:>9}" for c in short))
    label = "bound if the choice must be probed"
    print(f"{label:<44}" + "".join(f"{top:>9.0%}" for top in bound))
    print("(the bound holds for any search whose choice is a deployment it probed, within")
    print(" the dollar budget: sim.search_misses.probed_bound; this search may choose an")
    print(" unprobed one, so may pass it. The line above it is a what-if, not a bound)")
    blind = [(o.within, p[0]) for o, p in zip(columns["first"], planner, strict=True) if not o.fits]
    print(
        f"where no good deployment's probe fits ({len(blind)} first searches), within 5 %:\n"
        f"  this search {sum(w for w, _ in blind)}, the model planner (no probe) "
        f"{sum(m for _, m in blind)}"
    )
    if args.explain:
        print("\nMisses:")
        for outcomes in columns.values():
            for o in outcomes:
                if o.why is not None:
                    head, _, detail = o.where.partition("| ")
                    print(f"  {head}: {o.why}\n    {detail}")
    if args.ceiling:
        print("\n== 5. One affordable probe, the model's computation scaled to it exactly")
        print("(in hindsight, no noise: within 5 % / instances, per profile)")
        for name, hits in ceiling.items():
            print(f"{name:<18} {sum(hits):>3}/{len(hits)}")
    print(f"\n({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
