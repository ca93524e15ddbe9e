"""Adaptive training (CE-scaling §III-D, Algorithm 2): prediction error, policies, δ, speed.

Prints four tables:
1. mean / median relative error of the predicted total epochs at 10, 25, 50 and 75 % of
   training, online fit vs LambdaML-style offline sampling estimate (like Fig. 4), over
   simulated curves of the smooth families and, apart, of the learning-rate-drop family;
2. adaptive vs the static (LambdaML-like), every-epoch (Siren-like) and no-delay
   (Cirrus-like) policies on the Table IV workloads, at equal budget and at equal deadline;
3. a δ sweep from 0.01 to 0.2 (like Fig. 21c);
4. the wall time of one scheduler decision (fit + re-plan).

Run: .venv/bin/python benchmarks/bench_adaptive_training.py [--curves N] [--seed S]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from faasml.catalog import load_catalog
from faasml.exceptions import FaasmlError, InfeasibleConstraintError
from faasml.models.convergence import predict_epochs
from faasml.planners.adaptive import AdaptiveScheduler, training_frontier
from faasml.sim.synthetic import SyntheticCurve, random_curve
from faasml.sim.training import TrainingRun, offline_epochs_for, relative_error, simulate_training
from faasml.types import Constraint
from faasml.workload import load_workload

TABLE_IV = (
    "lr-higgs",
    "svm-higgs",
    "lr-yfcc",
    "svm-yfcc",
    "mobilenet-cifar10",
    "resnet50-cifar10",
    "bert-imdb",
)
POLICIES = ("adaptive", "static", "every-epoch", "no-delay")
SMOOTH = ("inverse", "exponential", "power")
PROGRESS = (0.10, 0.25, 0.50, 0.75)


def online_error(
    curve: SyntheticCurve, progress: float, prior: float | None = None, family: str = "auto"
) -> float:
    """Relative error of the total epochs predicted after ``progress`` of training (capped at
    100 %; a refusal counts 100 %); with ``prior``, combined with the offline estimate; with a
    ``family``, fitted with that family only (the curve's own: an oracle for the diagnosis)."""
    truth = curve.epochs_to_target
    seen = max(3, round(progress * truth))
    epochs = list(range(1, seen + 1))
    losses = [curve.observed(k) for k in epochs]
    try:
        predicted = predict_epochs(
            epochs, losses, curve.target_loss, family, prior_epochs=prior
        ).prediction.epochs
        return min(relative_error(predicted, truth), 1.0)
    except FaasmlError:
        return 1.0


def _cell(errors: Sequence[float]) -> str:
    return f"{statistics.mean(errors):>9.1%} ({statistics.median(errors):.1%})"


def prediction_table(count: int, seed: int) -> None:
    print("\n== 1. Predicted total epochs: mean (median) relative error, errors capped at 100 %")
    print(
        "(online: the fit alone; + prior: combined with the offline estimate, as "
        "predict_epochs(prior_epochs=...) does)"
    )
    cases = (
        ("smooth, noise 0.1–0.5 %", SMOOTH, (0.001, 0.005)),
        ("smooth, noise 0.3–2 %", SMOOTH, (0.003, 0.02)),
        ("lr-drop, noise 0.1–0.5 %", ("step",), (0.001, 0.005)),
    )
    header = f"{'curves':<26}{'n':>5}" + "".join(f"{f'{p:.0%} online':>18}" for p in PROGRESS)
    print(header + f"{'offline':>18}")
    by_family: list[str] = []
    for label, families, noise in cases:
        rng = np.random.default_rng(seed)
        curves = [random_curve(rng, families=families, noise=noise) for _ in range(count)]
        offline = [offline_epochs_for(c, fallback=10**6, seed=i) for i, c in enumerate(curves)]
        priors = [float(e) if e < 10**6 else None for e in offline]
        offline_errors = [
            min(relative_error(e, c.epochs_to_target), 1.0)
            for e, c in zip(offline, curves, strict=True)
        ]
        rows: dict[str, list[str]] = {"": [], "  + prior": []}
        quarter: dict[str, list[tuple[str, float]]] = {"": [], "  + prior": []}
        for progress in PROGRESS:
            for suffix, use in (("", False), ("  + prior", True)):
                errors = [
                    online_error(c, progress, p if use else None)
                    for c, p in zip(curves, priors, strict=True)
                ]
                rows[suffix].append(_cell(errors))
                if progress == 0.25:
                    quarter[suffix] = [(c.family, e) for c, e in zip(curves, errors, strict=True)]
            if progress == 0.25 and families == SMOOTH:
                quarter["true family"] = [
                    (c.family, online_error(c, progress, family=c.family)) for c in curves
                ]
        for suffix, cells in rows.items():
            print(
                f"{label + suffix:<26}{len(curves):>5}"
                + "".join(f"{cell:>18}" for cell in cells)
                + (f"{_cell(offline_errors):>18}" if not suffix else "")
            )
        for family in families:
            parts = []
            for suffix, pairs in quarter.items():
                errors = [e for f, e in pairs if f == family]
                worst = sum(e > 0.2 for e in errors)
                parts.append(
                    f"{suffix.strip() or 'online'} {_cell(errors).strip()}, >20 %: {worst}"
                )
            count_f = sum(f == family for f, _ in quarter[""])
            by_family.append(f"{label:<26}{family:<12}{count_f:>4}   " + "; ".join(parts))
    print(
        "\nAt 25 % of training, per curve family: mean (median) error, curves over 20 % "
        "(true family: the fit told the curve's family, a diagnosis no real run can make)"
    )
    for line in by_family:
        print(line)


RANDOM_RANGES = {"initial": (1.5, 4.0), "floor": (0.2, 0.8), "epochs": (15.0, 80.0)}
"""The ranges ``random_curve`` draws l(0)/target, floor/target and E from (its defaults)."""


def _grid_means(
    family: str, k: np.ndarray, l0: float, floor: np.ndarray, e: np.ndarray
) -> np.ndarray:
    """SyntheticCurve.mean (target 1) for one l(0) and every (floor, E) row, vectorised."""
    c, e = floor[:, None], e[:, None]
    kk = k[None, :]
    if family == "inverse":
        rho = (1.0 - c) * e / (l0 - 1.0)
        return np.asarray((l0 - c) * rho / (kk + rho) + c)
    ratio = (l0 - c) / (1.0 - c)
    if family == "exponential":
        return np.asarray((l0 - c) * np.exp(-np.log(ratio) / e * kk) + c)
    return np.asarray((l0 - c) * (kk + 1.0) ** (-np.log(ratio) / np.log(e + 1.0)) + c)


def bound_table(count: int, seed: int, progress: float = 0.25) -> None:
    """Diagnosis, not a predictor: the error of the Bayes estimator that knows what no real
    run knows — the ranges the benchmark draws curves from, the curve's noise level, and that
    there are no spikes — on spike-free curves, beside the online fit on the same curves.
    Grid posterior over (family, l(0), floor, E) with the generator's uniform priors."""
    print(
        f"\n== 1b. What the data allow at {progress:.0%} of training ({count} spike-free curves, "
        "noise 0.1–0.5 %): Bayes estimator told the generator's ranges and noise vs the online fit"
    )
    initial = np.linspace(*RANDOM_RANGES["initial"], 120)
    floor_grid, e_grid = np.meshgrid(
        np.linspace(*RANDOM_RANGES["floor"], 100),
        np.geomspace(*RANDOM_RANGES["epochs"], 100),
        indexing="ij",
    )
    floors, es = floor_grid.ravel(), e_grid.ravel()
    probe = SyntheticCurve("power", 2.5, 0.4, 1.0, 30.0)
    check = _grid_means("power", np.arange(1.0, 4.0), 2.5, np.array([0.4]), np.array([30.0]))
    if not np.allclose(check[0], probe.mean(np.arange(1.0, 4.0))):
        raise RuntimeError("_grid_means no longer matches SyntheticCurve.mean")
    rng = np.random.default_rng(seed)
    curves = [
        dataclasses.replace(
            random_curve(rng, families=SMOOTH, noise=(0.001, 0.005)), spike_probability=0.0
        )
        for _ in range(count)
    ]
    bayes, online = [], []
    for curve in curves:
        truth = curve.epochs_to_target
        k = np.arange(1, max(3, round(progress * truth)) + 1, dtype=float)
        y = np.array([curve.observed(int(j)) for j in k])
        logs, epochs = [], []
        for family in SMOOTH:
            for l0 in initial:
                mean = _grid_means(family, k, float(l0), floors, es)
                z = (y[None, :] - mean) / (curve.noise * mean)
                # uniform prior on E over a log grid: weight ∝ E
                logs.append(-0.5 * (z * z).sum(axis=1) - np.log(mean).sum(axis=1) + np.log(es))
                epochs.append(es)
        log_post, grid_e = np.concatenate(logs), np.concatenate(epochs)
        weight = np.exp(log_post - log_post.max()) / grid_e  # minimises E|x − E|/E
        order = np.argsort(grid_e)
        cumulative = np.cumsum(weight[order]) / weight.sum()
        estimate = float(grid_e[order][np.searchsorted(cumulative, 0.5)])
        bayes.append(min(relative_error(estimate, truth), 1.0))
        online.append(online_error(curve, progress))
    print(f"{'Bayes, told the generator':<30}{_cell(bayes)}")
    print(f"{'online fit (this predictor)':<30}{_cell(online)}")


def _curves(workload_target: float, count: int, seed: int) -> list[SyntheticCurve]:
    rng = np.random.default_rng(seed)
    return [
        random_curve(rng, workload_target, families=SMOOTH, epochs=(15.0, 60.0))
        for _ in range(count)
    ]


def _constraint(
    kind: str,
    frontier_time: np.ndarray,
    frontier_cost: np.ndarray,
    startup: np.ndarray,
    cold: float,
    epochs: int,
    slack: float,
) -> Constraint:
    if kind == "budget":
        return Constraint(budget_usd=slack * float((startup + epochs * frontier_cost).min()))
    return Constraint(deadline_s=slack * float((cold + epochs * frontier_time).min()))


PAPER_STORAGE = (("siren-s3", "every-epoch", "s3"), ("cirrus-vmps", "no-delay", "vm-ps"))
"""The baselines as the paper ran them (§IV-A, §IV-C): Siren on S3, Cirrus on its VM-PS."""


def policy_table(count: int, seed: int, slack: float) -> None:
    print(
        f"\n== 2. Policies on the Table IV workloads ({count} curves each, constraint = "
        f"{slack:g} × the least that fits the true epochs; siren-s3 and cirrus-vmps are the "
        "every-epoch and no-delay policies on the storage the paper gave them)"
    )
    catalog = load_catalog("aws-lambda")
    labels = (*POLICIES, *(label for label, _, _ in PAPER_STORAGE))
    totals: dict[tuple[str, str], list[TrainingRun | None]] = defaultdict(list)
    refused: dict[str, int] = defaultdict(int)
    print(
        f"{'workload':<19}{'kind':<9}{'policy':<13}{'met':>5}{'not':>5}{'time s':>10}"
        f"{'cost $':>10}{'restarts':>10}"
    )
    for name in TABLE_IV:
        workload = load_workload(name)
        frontier = training_frontier(workload, catalog)
        setups = {policy: (policy, catalog, frontier) for policy in POLICIES}
        for label, policy, storage in PAPER_STORAGE:
            narrow = training_frontier(workload, catalog, storages=[storage])
            setups[label] = (policy, catalog, narrow)
        curves = _curves(workload.target_loss or 1.0, count, seed)
        for kind in ("budget", "deadline"):
            runs: dict[str, list[TrainingRun | None]] = defaultdict(list)
            for index, curve in enumerate(curves):
                constraint = _constraint(
                    kind,
                    frontier.time_s,
                    frontier.cost_usd,
                    frontier.startup_usd,
                    catalog.platform.cold_start_s,
                    curve.true_epochs,
                    slack,
                )
                estimate = offline_epochs_for(curve, fallback=workload.epochs, seed=index)
                outcome: dict[str, TrainingRun | None] = {}
                for label, (policy, cat, front) in setups.items():
                    try:
                        outcome[label] = simulate_training(
                            workload,
                            cat,
                            constraint,
                            curve,
                            policy=policy,
                            offline_epochs=estimate,
                            frontier=front,
                            seed=index,
                        )
                    except InfeasibleConstraintError:
                        outcome[label] = None  # refused: the offline estimate does not fit
                if outcome["adaptive"] is None:
                    refused["all " + kind] += 1  # nothing starts on the full catalog either
                    continue
                for label, run in outcome.items():
                    runs[label].append(run)
                    totals[(kind, label)].append(run)
            for label in labels:
                done = [r for r in runs[label] if r is not None]
                if not done:
                    continue
                print(
                    f"{name:<19}{kind:<9}{label:<13}{sum(r.met for r in done):>5}"
                    f"{len(runs[label]) - sum(r.met for r in done):>5}"
                    f"{statistics.mean(r.time_s for r in done):>10.0f}"
                    f"{statistics.mean(r.cost_usd for r in done):>10.3f}"
                    f"{statistics.mean(r.restarts for r in done):>10.1f}"
                )
    print("\nSummary over every workload (paired with adaptive on the same curve and constraint)")
    print(
        f"{'kind':<9}{'policy':<13}{'runs':>6}{'met':>6}{'refused':>9}{'overspent':>11}"
        f"{'missed':>8}{'restarts':>10}{'adaptive vs it (both met)':>38}"
    )
    for kind in ("budget", "deadline"):
        base = totals[(kind, "adaptive")]
        for label in labels:
            every = totals[(kind, label)]
            done = [r for r in every if r is not None]
            both = [
                (a, b)
                for a, b in zip(base, every, strict=True)
                if a is not None and b is not None and a.met and b.met
            ]
            if kind == "budget":
                changes = [a.time_s / b.time_s - 1 for a, b in both]
                what = "time"
            else:
                changes = [a.cost_usd / b.cost_usd - 1 for a, b in both]
                what = "cost"
            comparison = (
                f"{what} {statistics.mean(changes):+.1%} mean, {min(changes):+.1%} best"
                if both and label != "adaptive"
                else "-"
            )
            print(
                f"{kind:<9}{label:<13}{len(every):>6}{sum(r.met for r in done):>6}"
                f"{len(every) - len(done):>9}{sum(r.violated for r in done):>11}"
                f"{sum(not r.reached for r in done):>8}"
                f"{statistics.mean(r.restarts for r in done) if done else 0:>10.1f}"
                f"{comparison:>38}"
            )
        print(f"{kind:<9}curves where no policy could start: {refused['all ' + kind]}")


def delta_table(count: int, seed: int, slack: float) -> None:
    print(f"\n== 3. δ sweep (adaptive, budget = {slack:g} × least, {count} curves per workload)")
    catalog = load_catalog("aws-lambda")
    print(f"{'workload':<19}{'δ':>6}{'restarts':>10}{'time':>10}{'cost':>10}{'met':>6}")
    for name in ("lr-yfcc", "mobilenet-cifar10"):
        workload = load_workload(name)
        frontier = training_frontier(workload, catalog)
        curves = _curves(workload.target_loss or 1.0, count, seed)
        for delta in (0.01, 0.05, 0.1, 0.15, 0.2):
            runs = []
            for index, curve in enumerate(curves):
                constraint = _constraint(
                    "budget",
                    frontier.time_s,
                    frontier.cost_usd,
                    frontier.startup_usd,
                    catalog.platform.cold_start_s,
                    curve.true_epochs,
                    slack,
                )
                try:
                    runs.append(
                        simulate_training(
                            workload,
                            catalog,
                            constraint,
                            curve,
                            delta=delta,
                            offline_epochs=offline_epochs_for(
                                curve, fallback=workload.epochs, seed=index
                            ),
                            frontier=frontier,
                            seed=index,
                        )
                    )
                except InfeasibleConstraintError:
                    continue
            print(
                f"{name:<19}{delta:>6.2f}{statistics.mean(r.restarts for r in runs):>10.2f}"
                f"{statistics.mean(r.time_s for r in runs):>10.0f}"
                f"{statistics.mean(r.cost_usd for r in runs):>10.3f}{sum(r.met for r in runs):>6}"
            )


def speed_table(seed: int) -> None:
    print("\n== 4. Wall time of one decision (observe: fit + δ test + re-plan over the frontier)")
    catalog = load_catalog("aws-lambda")
    print(
        f"{'workload':<19}{'frontier':>9}{'decisions':>10}{'mean ms':>9}{'p50 ms':>8}"
        f"{'p99 ms':>8}{'re-plan mean ms':>16}{'CPU mean ms':>13}"
    )
    rng = np.random.default_rng(seed)
    for name in ("lr-higgs", "mobilenet-cifar10", "bert-imdb"):
        workload = load_workload(name)
        frontier = training_frontier(workload, catalog)
        all_ms: list[float] = []
        cpu_ms: list[float] = []
        replan_ms: list[float] = []
        for _ in range(5):
            curve = random_curve(rng, workload.target_loss or 1.0, families=SMOOTH, epochs=(30, 60))
            budget = 10 * float((frontier.startup_usd + 60 * frontier.cost_usd).min())
            policy = AdaptiveScheduler(
                workload,
                catalog,
                Constraint(budget_usd=budget),
                curve.target_loss,
                offline_epochs=curve.true_epochs * 2,
                frontier=frontier,
            )
            policy.start()
            for epoch in range(1, curve.true_epochs):
                loss = curve.observed(epoch)
                start, cpu = time.perf_counter(), time.process_time()
                decision = policy.observe(epoch, loss, 0.0, 0.0)
                elapsed = (time.perf_counter() - start) * 1000
                cpu_ms.append((time.process_time() - cpu) * 1000)
                all_ms.append(elapsed)
                if "re-planned" in decision.reason:
                    replan_ms.append(elapsed)
                if decision.decision.value == "stop":
                    break
        ordered = sorted(all_ms)
        print(
            f"{name:<19}{len(frontier):>9}{len(all_ms):>10}{statistics.mean(all_ms):>9.2f}"
            f"{ordered[len(ordered) // 2]:>8.2f}{ordered[int(0.99 * (len(ordered) - 1))]:>8.2f}"
            f"{statistics.mean(replan_ms) if replan_ms else float('nan'):>16.2f}"
            f"{statistics.mean(cpu_ms):>13.2f}"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(load average {load:.1f} on {os.cpu_count()} CPUs while measuring)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curves", type=int, default=100, help="curves for table 1")
    parser.add_argument("--runs", type=int, default=8, help="curves per workload, tables 2–3")
    parser.add_argument("--slack", type=float, default=1.5, help="constraint slack, tables 2–3")
    parser.add_argument("--seed", type=int, default=2023)
    parser.add_argument(
        "--only-prediction", action="store_true", help="print table 1 only (prediction error)"
    )
    parser.add_argument(
        "--bound",
        type=int,
        default=0,
        metavar="N",
        help="also print table 1b over N curves (slow: about 3 s a curve)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    prediction_table(args.curves, args.seed)
    if args.bound:
        bound_table(args.bound, args.seed)
    if args.only_prediction:
        print(f"\n(benchmark took {time.perf_counter() - started:.0f} s)")
        return
    policy_table(args.runs, args.seed, args.slack)
    delta_table(args.runs, args.seed, args.slack)
    speed_table(args.seed)
    print(f"\n(benchmark took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
