"""Samplers at equal dollars: the best validation metric faasml's samplers find, against Optuna's
own TPE + successive-halving pruner and Ray Tune's ASHA + Optuna search on the same budget.

Per seed (the job's seed), on one job (default: a small MLP on generated Higgs-like data with
a conditional momentum; ``--job`` takes a job file such as examples/tune-digits.yaml):

- faasml ``random`` and ``tpe``: successive halving, ``--trials`` trials, η = 2, one epoch per
  stage (``tpe``'s first stage runs in batches of whole waves where the plan runs it in more
  than one: random start-up trials, then each batch drawn from what the batches before
  measured);
- faasml ``hyperband`` (random) and ``bohb`` (``tpe``): Hyperband for R = ``--max-epochs``,
  η = 3, later brackets drawn from TPE fitted on the earlier brackets' results;
  every faasml run within ``--budget`` dollars, on the local platform, for real;
- Optuna: ``TPESampler`` + ``SuccessiveHalvingPruner`` (η = 3, min resource 1 epoch, at most
  R epochs a trial), and Ray Tune: ``ASHAScheduler`` + ``OptunaSearch``; each trains the same
  model, data and configurations in this process (one worker, the job's batch size) until it
  has trained as many trial-epochs as the largest faasml run of the seed did, on one torch
  thread (as a function of one vCPU; Ray started once for every seed).

Prints one row per seed and method (best validation metric, trial-epochs; for faasml the bill
less measuring the job, the run's own prediction of it, and what measuring the job cost: a
seed's data is new, so its first run measures it; the profile of seed 0 is measured before the
rows), the median over seeds, and each faasml method's median bill over its prediction.

    .venv/bin/python benchmarks/record.py --out benchmarks/results/samplers.md -- \\
        benchmarks/bench_samplers.py --seeds 10
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import statistics
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from faasml.job import JobSpec, apply_config, from_mapping, load_job
from faasml.runtime.runs.session import TuneRun
from faasml.searchspace import Choice, IntUniform, LogUniform, SearchSpace, Uniform
from faasml.types import Constraint
from faasml.workloads.build import build_model, build_optimizer, load_data

JOB: dict[str, Any] = {
    "name": "bench-samplers",
    "model": {"name": "mlp", "hidden": [32]},
    "dataset": {"synthetic": "higgs-like", "samples": 4000, "test_fraction": 0.25},
    "optimizer": {"name": "sgd", "lr": 0.05},
    "search_space": {
        "optimizer.name": {"choice": ["sgd", "adam"]},
        "optimizer.lr": {"loguniform": [0.0001, 1.0]},
        "optimizer.momentum": {"uniform": [0.0, 0.99], "when": {"optimizer.name": "sgd"}},
    },
    "tuning": {"trials": 8},
    "batch_size": 64,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
}


def _job(base: dict[str, Any], seed: int, tuning: dict[str, Any]) -> JobSpec:
    data = {**base, "seed": seed, "tuning": {**tuning, "metric": base["tuning"]["metric"]}}
    return from_mapping(data)


def faasml_run(
    base: dict[str, Any], seed: int, tuning: dict[str, Any], budget: float, folder: Path
) -> tuple[float, int, float, float, float]:
    """(best validation metric, trial-epochs, dollars billed for the run, dollars the run
    predicted, dollars measuring the job cost) of one faasml run. The plan predicts the run
    after the job is measured, so its bill is compared without the measuring: a seed's first
    run measures its new data's profile (the profile's key counts the data), the others find
    it in the cache."""
    run = TuneRun(_job(base, seed, tuning), Constraint(budget_usd=budget), folder)
    run.plan()
    record = run.execute()
    epochs = sum(len(t.history) for t in record.trials)
    best = record.best
    value: float | None = None
    if best is not None:
        value = best.val_accuracy if base["tuning"]["metric"] == "accuracy" else best.val_loss
    plan = record.plan
    predicted = math.nan if plan is None or plan.predicted is None else plan.predicted.cost_usd
    metric = math.nan if value is None else float(value)
    return metric, epochs, record.run_usd(), predicted, record.usd_of("profiling")


class Trainer:
    """One configuration of the job trained in this process, an epoch at a time."""

    def __init__(self, job: JobSpec, config: dict[str, Any], data: Any) -> None:
        self.job = apply_config(job, config)
        self.train, self.test = data
        self.model = build_model(self.job.model, self.train.input_shape, self.train.num_classes)
        self.params = self.model.init_params(self.job.seed)
        self.optimizer = build_optimizer(self.job.optimizer, self.model.num_params)
        self.rng = np.random.default_rng(self.job.seed)

    def epoch(self, metric: str) -> float:
        """Train one epoch; the validation metric after it."""
        order = self.rng.permutation(len(self.train))
        size = self.job.batch_size
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            x, y = self.train.features[rows], self.train.labels[rows]
            _, grad = self.model.loss_and_grad(self.params, x, y)
            self.params = self.optimizer.step(self.params, grad)
        scores = self.model.evaluate(self.params, self.test.features, self.test.labels)
        value = float(scores["accuracy"] if metric == "accuracy" else scores["loss"])
        return value if math.isfinite(value) else (-math.inf if metric == "accuracy" else math.inf)


def suggest(trial: Any, space: SearchSpace) -> dict[str, Any]:
    """An Optuna trial's configuration of the job's space, define-by-run (conditions too)."""
    config: dict[str, Any] = {}
    for name in space.order():
        if not space.active(name, config):
            continue
        dist = space.params[name]
        if isinstance(dist, Choice):
            index = trial.suggest_categorical(name, list(range(len(dist.values))))
            config[name] = dist.values[index]
        elif isinstance(dist, IntUniform):
            config[name] = trial.suggest_int(name, dist.low, dist.high)
        else:
            log = isinstance(dist, LogUniform)
            assert isinstance(dist, Uniform | LogUniform)
            config[name] = trial.suggest_float(name, dist.low, dist.high, log=log)
    return config


def optuna_run(job: JobSpec, seed: int, max_epochs: int, budget_epochs: int) -> float:
    """Optuna's TPE + successive-halving pruner until ``budget_epochs`` trial-epochs."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    metric = job.require_tuning().metric
    assert job.search_space is not None
    study = optuna.create_study(
        direction="maximize" if metric == "accuracy" else "minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3),
    )
    data, used, best = load_data(job.dataset), 0, []
    while used < budget_epochs:
        trial = study.ask()
        trainer = Trainer(job, suggest(trial, job.search_space), data)
        value, pruned = math.nan, False
        for step in range(1, max_epochs + 1):
            value = trainer.epoch(metric)
            used += 1
            trial.report(value, step)
            if trial.should_prune() or used >= budget_epochs:
                pruned = True
                break
        best.append(value)
        if pruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, value)
    return _best(best, metric)


def _value(space: SearchSpace, name: str, raw: Any) -> Any:
    """A parameter's value from Optuna's raw one (a choice's index among its values)."""
    dist = space.params[name]
    return dist.values[raw] if isinstance(dist, Choice) else raw


class _Define:
    """The search space as Optuna's define-by-run function (a class: Ray Tune pickles its
    searcher's state, and a local function cannot be pickled)."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space

    def __call__(self, trial: Any) -> None:
        suggest(trial, self.space)


def ray_run(job: JobSpec, seed: int, max_epochs: int, budget_epochs: int) -> float:
    """Ray Tune's ASHA + OptunaSearch until ``budget_epochs`` trial-epochs, one trial at once."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # verbose=0 is then silent
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # no result files
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    metric = job.require_tuning().metric
    mode = "max" if metric == "accuracy" else "min"
    assert job.search_space is not None
    space = job.search_space
    data = load_data(job.dataset)

    def trainable(config: dict[str, Any]) -> None:
        torch.set_num_threads(1)  # one worker, as the in-process baselines
        # Ray hands over Optuna's raw parameters: a choice as its index among the values.
        chosen = {k: _value(space, k, v) for k, v in config.items() if v is not None}
        trainer = Trainer(job, chosen, data)
        for _ in range(max_epochs):
            tune.report({"value": trainer.epoch(metric)})

    class Budget(tune.Stopper):
        def __init__(self) -> None:
            self.used = 0

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            self.used += 1
            return False

        def stop_all(self) -> bool:
            return self.used >= budget_epochs

    search = OptunaSearch(space=_Define(space), metric="value", mode=mode, seed=seed)
    if not ray.is_initialized():  # once for every seed (``main`` shuts it down)
        ray.init(
            num_cpus=1,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=search,
            scheduler=ASHAScheduler(max_t=max_epochs, grace_period=1, reduction_factor=3),
            num_samples=budget_epochs,
            metric="value",
            mode=mode,
            max_concurrent_trials=1,
            reuse_actors=True,  # one worker process for every trial, as Optuna in-process
        ),
        run_config=tune.RunConfig(stop=Budget(), verbose=0),
    )
    grid = tuner.fit()
    results = [grid[i] for i in range(len(grid))]
    values = [r.metrics.get("value", math.nan) for r in results if r.metrics]
    return _best(values, metric)


def _best(values: list[float], metric: str) -> float:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan
    return max(finite) if metric == "accuracy" else min(finite)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--job", type=Path, help="a job file (default: a small MLP job)")
    parser.add_argument("--budget", type=float, default=0.05, help="US dollars per faasml run")
    parser.add_argument("--trials", type=int, default=32, help="successive halving's trials")
    parser.add_argument("--max-epochs", type=int, default=9, help="Hyperband's R")
    parser.add_argument("--no-ray", action="store_true", help="skip Ray Tune")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # rows as they come
    torch.set_num_threads(1)  # the in-process baselines train as one worker of one vCPU
    base = JOB if args.job is None else load_job(args.job).to_dict(redact=False)
    base = {**base, "tuning": {"metric": base.get("tuning", {}).get("metric", "loss")}}
    metric = base["tuning"]["metric"]
    sha = {"trials": args.trials, "reduction_factor": 2, "epochs_per_stage": 1}
    hyperband = {"hyperband": args.max_epochs, "reduction_factor": 3}
    methods: dict[str, dict[str, Any]] = {
        "faasml random": {**sha, "sampler": "random"},
        "faasml tpe": {**sha, "sampler": "tpe"},
        "faasml hyperband": {**hyperband, "sampler": "random"},
        "faasml bohb": {**hyperband, "sampler": "tpe"},
    }
    print(f"job {base['name']}, metric: validation {metric}; ${args.budget} per faasml run")
    print(
        f"{'seed':>4}  {'method':<22}{'best':>10}{'trial-epochs':>14}{'dollars':>11}"
        f"{'predicted':>11}{'profiling':>11}"
    )
    with tempfile.TemporaryDirectory() as folder:  # the job's profile, cached for every run
        faasml_run(base, 0, {**sha, "trials": 2, "stages": 1}, args.budget, Path(folder) / "r")
    results: dict[str, list[float]] = {}
    billed: dict[str, list[float]] = {}
    ray_skipped = "--no-ray" if args.no_ray else None
    for seed in range(args.seeds):
        most = 0
        for name, tuning in methods.items():
            with tempfile.TemporaryDirectory() as folder:
                run_dir = Path(folder) / "r"
                value, epochs, usd, predicted, profiling = faasml_run(
                    base, seed, tuning, args.budget, run_dir
                )
            most = max(most, epochs)
            results.setdefault(name, []).append(value)
            billed.setdefault(name, []).append(usd / predicted if predicted > 0 else math.nan)
            print(
                f"{seed:>4}  {name:<22}{value:>10.4f}{epochs:>14}{usd:>11.6f}{predicted:>11.6f}"
                f"{profiling:>11.6f}"
            )
        job = _job(base, seed, sha)
        value = optuna_run(job, seed, args.max_epochs, most)
        results.setdefault("optuna tpe + sha", []).append(value)
        print(f"{seed:>4}  {'optuna tpe + sha':<22}{value:>10.4f}{most:>14}{'-':>11}")
        if ray_skipped is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value = ray_run(job, seed, args.max_epochs, most)
            except Exception as err:  # any failure of Ray here is a skip, with its reason
                ray_skipped = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
            else:
                results.setdefault("ray asha + optuna", []).append(value)
                print(f"{seed:>4}  {'ray asha + optuna':<22}{value:>10.4f}{most:>14}{'-':>11}")
    if ray_skipped is None:
        import ray

        ray.shutdown()
    else:
        print(f"Ray Tune skipped: {ray_skipped}")
    print(f"\nmedian over {args.seeds} seed(s) of the best validation {metric}:")
    for name, values in results.items():
        print(f"  {name:<22}{statistics.median(values):>10.4f}")
    print(f"\nmedian over {args.seeds} seed(s) of the bill over the run's prediction:")
    for name, ratios in billed.items():
        print(f"  {name:<22}{statistics.median(ratios):>10.2f}")


if __name__ == "__main__":
    main()
