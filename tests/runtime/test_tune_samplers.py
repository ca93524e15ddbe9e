"""Tuning runs whose trials a sampler draws: Hyperband's later brackets from a model fitted on
the earlier brackets' results, conditional parameters, the API's ``search_alg``; real training."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import torch
import yaml

import faasml
from faasml.exceptions import ConfigError
from faasml.job import from_mapping
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.samplers import ConfigSampler
from faasml.types import Constraint
from faasml.workloads.data import Dataset

from .tiny_jobs import tiny_tune_job


def _hyperband_job(sampler: str) -> dict[str, Any]:
    """Hyperband for R = 3, η = 3: a bracket of 3 trials (1 epoch, then the best to 3) and a
    bracket of 2 trials of 3 epochs; 5 trials on 1,200 samples in all."""
    data = tiny_tune_job(f"hyperband-{sampler}")
    data["tuning"] = {"hyperband": 3, "reduction_factor": 3, "sampler": sampler}
    if sampler != "random":  # a model from the first bracket's 3 results at 1 epoch
        data["tuning"]["sampler_options"] = {"min_points": 3}
    return data


def test_hyperband_with_tpe_draws_the_later_bracket_from_the_first_brackets_results(
    tmp_path: Path,
) -> None:
    job = from_mapping(_hyperband_job("tpe"))
    run = TuneRun(job, Constraint(budget_usd=0.05), tmp_path / "run")
    run.plan()
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    # The plan is Hyperband's, unchanged by the sampler: stages of 3, 1 and 2 trials.
    assert [s["trials"] for s in record["plan"]["stages"]] == [3, 1, 2]
    trials = record["trials"]
    assert sorted(len(t["history"]) for t in trials[:3]) == [1, 1, 3]
    assert [len(t["history"]) for t in trials[3:]] == [3, 3]
    events = [e["text"] for e in record["events"]]
    assert "bracket 2: 2 trials drawn by tpe from 3 results at 1 epoch(s)" in events
    # The second bracket's configurations are TPE's, told the first bracket's losses at 1
    # epoch (the one budget with 3 results); not the draws the random sampler makes there.
    sampler = ConfigSampler(job.search_space, "tpe", job.seed, {"min_points": 3})  # type: ignore[arg-type]
    for trial in trials[:3]:
        sampler.observe(trial["config"], 1, trial["history"][0]["val_loss"])
    assert [t["config"] for t in trials[3:]] == sampler.draw(2, start=3)
    random = ConfigSampler(job.search_space, "random", job.seed)  # type: ignore[arg-type]
    assert [t["config"] for t in trials[3:]] != random.draw(2, start=3)
    assert [t["config"] for t in trials[:3]] == random.draw(3)  # nothing told yet: random's


def test_random_hyperband_draws_every_bracket_as_the_random_sampler(tmp_path: Path) -> None:
    job = from_mapping(_hyperband_job("random"))
    run = TuneRun(job, Constraint(budget_usd=0.05), tmp_path / "run")
    run.plan()
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    random = ConfigSampler(job.search_space, "random", job.seed)  # type: ignore[arg-type]
    assert [t["config"] for t in record["trials"]] == random.draw(5)
    assert all(len(t["history"]) == 3 for t in record["trials"][3:])  # from nothing to 3


CONDITIONAL = {
    "optimizer.name": {"choice": ["sgd", "adam"]},
    "optimizer.momentum": {"uniform": [0.0, 0.9], "when": {"optimizer.name": "sgd"}},
}


def test_the_api_takes_a_conditional_space_and_a_sampler_by_name(tmp_path: Path) -> None:
    data = tiny_tune_job("api-conditional")
    data["tuning"] = {"trials": 4, "reduction_factor": 2, "epochs_per_stage": 1, "stages": 1}
    tuner = faasml.Tuner(
        from_mapping(data),
        param_space=CONDITIONAL,
        tune_config=faasml.TuneConfig(budget=0.05, search_alg="grid"),
        run_dir=tmp_path / "run",
    )
    assert tuner.job.tuning is not None and tuner.job.tuning.sampler == "grid"
    results = tuner.fit()
    configs = [r.config for r in results.results]
    assert len({repr(sorted(c.items())) for c in configs}) == 4  # sgd × 3 momenta, adam
    for config in configs:
        assert ("optimizer.momentum" in config) == (config["optimizer.name"] == "sgd")
    assert all(r.status == "done" for r in results.results)


def test_the_api_takes_an_optuna_sampler_object(tmp_path: Path) -> None:
    data = _hyperband_job("tpe")  # its min_points stand; the object draws in place of tpe
    sampler = optuna.samplers.TPESampler(seed=1)
    tuner = faasml.Tuner(
        from_mapping(data),
        tune_config=faasml.TuneConfig(budget=0.05, search_alg=sampler),
        run_dir=tmp_path / "run",
    )
    record = tuner.fit().record
    events = [e.text for e in record.events]
    assert "bracket 2: 2 trials drawn by TPESampler from 3 results at 1 epoch(s)" in events
    assert all(math.isfinite(t.last["val_loss"]) for t in record.trials if t.history)


@pytest.mark.parametrize("search_alg", ["bayes", 3])
def test_a_bad_search_alg_is_one_line(search_alg: object) -> None:
    data = tiny_tune_job("bad-search-alg")
    with pytest.raises(ConfigError) as caught:
        faasml.Tuner(from_mapping(data), tune_config=faasml.TuneConfig(0.05, search_alg=search_alg))
    assert "random, grid, tpe, gp" in str(caught.value) and "\n" not in str(caught.value)


def test_a_training_function_takes_a_conditional_space(tmp_path: Path) -> None:
    features = np.random.default_rng(0).normal(size=(120, 3)).astype(np.float32)
    labels = (features[:, 0] > 0).astype(np.int64)

    def train_fn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
        return faasml.TorchTrainable(
            model=torch.nn.Linear(3, 2),
            train=lambda: Dataset.from_arrays(features, labels),
            optimizer="sgd",
            lr=config["lr"],
            momentum=config.get("momentum", 0.0),
        )

    tuner = faasml.Tuner(
        train_fn,
        {
            "lr": {"loguniform": [0.01, 0.5]},
            "decay": {"choice": ["none", "momentum"]},
            "momentum": {"uniform": [0.5, 0.9], "when": {"decay": "momentum"}},
        },
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=8, search_alg="tpe"),
        run_dir=tmp_path / "run",
    )
    configs = [tuner.user_config(c) for c in tuner.job.sample_configs()]
    assert {c["decay"] for c in configs} == {"none", "momentum"}
    for config in configs:
        assert ("momentum" in config) == (config["decay"] == "momentum")


def _two_vcpu_catalog(folder: Path) -> Path:
    """The local catalog on a machine of two vCPUs, each function one vCPU whatever its
    memory: a stage runs 2 // n trials of n functions at once, on any machine."""
    from faasml import catalog

    text = (Path(catalog.__file__).parent / "data" / "local.yaml").read_text()
    for line, fixed in (
        ("mb_per_vcpu: 1769", "mb_per_vcpu: 128"),
        ("max_vcpus: auto ", "max_vcpus: 1 "),
        ("capacity_vcpus: auto", "capacity_vcpus: 2"),
    ):
        assert line in text
        text = text.replace(line, fixed)
    path = folder / "two-vcpus.yaml"
    path.write_text(text)
    return path


def test_tpe_draws_a_stages_later_trials_from_what_its_earlier_trials_measured(
    tmp_path: Path,
) -> None:
    from faasml.runtime.runs.tune_draws import batch_sizes

    data = tiny_tune_job("tpe-within-stage")
    data["catalog"] = str(_two_vcpu_catalog(tmp_path))
    data["tuning"] = {"trials": 6, "stages": 1, "epochs_per_stage": 1, "sampler": "tpe"}
    data["tuning"]["sampler_options"] = {"min_points": 2}
    job = from_mapping(data)
    run = TuneRun(job, Constraint(budget_usd=0.05), tmp_path / "run")
    run.plan()
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    # The plan's stage stands: its 6 trials of 1 epoch, in waves of 2 // n trials.
    stage = record["plan"]["stages"]
    assert [(s["trials"], s["epochs"]) for s in stage] == [(6, 1)]
    wave = max(1, 2 // stage[0]["allocation"]["n"])
    trials = record["trials"]
    assert [len(t["history"]) for t in trials] == [1] * 6
    events = [e["text"] for e in record["events"]]
    sizes = batch_sizes(6, wave, 2)
    assert len(sizes) > 1
    random = ConfigSampler(job.search_space, "random", job.seed)  # type: ignore[arg-type]
    assert [t["config"] for t in trials[: sizes[0]]] == random.draw(sizes[0])  # the start-up
    losses = [t["history"][0]["val_loss"] for t in trials]
    start = sizes[0]
    for size in sizes[1:]:
        # The batch is TPE's draw told the losses the trials before it measured; told other
        # losses (the same ones, reversed in rank), TPE draws other configurations.
        which = f"trial {start}" if size == 1 else f"trials {start}-{start + size - 1}"
        assert f"stage 1: {which} drawn by tpe from {start} results at 1 epoch(s)" in events
        told = ConfigSampler(job.search_space, "tpe", job.seed, {"min_points": 2})  # type: ignore[arg-type]
        other = ConfigSampler(job.search_space, "tpe", job.seed, {"min_points": 2})  # type: ignore[arg-type]
        for trial, loss in zip(trials[:start], losses[:start], strict=True):
            told.observe(trial["config"], 1, loss)
            other.observe(trial["config"], 1, -loss)
        drawn = [t["config"] for t in trials[start : start + size]]
        assert drawn == told.draw(size, start=start)
        assert drawn != other.draw(size, start=start)
        assert drawn != random.draw(size, start=start)
        start += size


def test_a_stage_is_split_into_batches_of_whole_waves() -> None:
    from faasml.runtime.runs.tune_draws import MAX_BATCHES, batch_sizes

    assert batch_sizes(6, 1, 3) == [3, 1, 1, 1]
    assert batch_sizes(8, 3, 6) == [6, 2]  # the last wave is what is left
    assert batch_sizes(4, 2, 1) == [2, 2]
    sizes = batch_sizes(32, 1, 6)
    assert sizes[0] == 6 and sum(sizes) == 32 and len(sizes) == MAX_BATCHES
    assert sizes[1:] == sorted(sizes[1:])  # the longer batches later


def test_tune_config_hyperband_replaces_the_jobs_successive_halving(tmp_path: Path) -> None:
    data = tiny_tune_job("api-hyperband")  # successive halving: 2 trials, 1 stage
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(data))
    config = faasml.TuneConfig(budget=0.05, hyperband=3, reduction_factor=3)
    for job in (from_mapping(data), str(job_file)):
        tuner = faasml.Tuner(job, tune_config=config, run_dir=tmp_path / "run")
        tuning = tuner.job.require_tuning()
        assert tuning.hyperband == 3 and tuning.trials_per_stage == (3, 1, 2)
    with pytest.raises(ConfigError) as caught:
        faasml.Tuner(from_mapping(data), tune_config=faasml.TuneConfig(hyperband=3, num_samples=8))
    assert str(caught.value) == (
        "hyperband=3 sets the brackets' trials, stages and epochs; leave out num_samples"
    )
