"""Job files: the examples load, layers override in order, every error names its field."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.exceptions import ConfigError
from faasml.job import (
    apply_config,
    environment_overrides,
    from_mapping,
    load_job,
    redact_url,
)
from faasml.models.shape import SuccessiveHalving
from faasml.searchspace import parse_search_space
from faasml.workload import load_workload
from faasml.workloads.build import build_model, build_optimizer, load_data
from faasml.workloads.data import higgs_like, write_higgs_csv

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))

BASE: dict[str, Any] = {
    "name": "t",
    "model": "logistic-regression",
    "dataset": {"synthetic": "higgs-like", "samples": 100, "features": 4},
    "optimizer": {"name": "sgd", "lr": 0.1},
}


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_there_are_examples_and_they_load_and_build() -> None:
    assert len(EXAMPLES) >= 3
    for path in EXAMPLES:
        job = load_job(path, environ={})
        assert job.source == str(path)
        assert job.to_dict()["name"] == job.name
        if job.tuning is not None:
            configs = job.sample_configs()
            assert len(configs) == job.tuning.trials
            trial = apply_config(job, configs[0])
            assert trial.optimizer.hyperparameters["lr"] == configs[0]["optimizer.lr"]


def test_examples_build_a_model_that_fits_their_data() -> None:
    job = load_job(next(p for p in EXAMPLES if p.name == "tune-logreg.yaml"), environ={})
    train, test = load_data(job.dataset)
    assert len(train) + len(test) == job.dataset.samples
    model = build_model(job.model, train.input_shape, train.num_classes)
    optimizer = build_optimizer(job.optimizer, model.num_params)
    loss, grad = model.loss_and_grad(
        model.init_params(job.seed), train.features[:8], train.labels[:8]
    )
    assert np.isfinite(loss) and optimizer.step(model.init_params(0), grad).shape == grad.shape


def test_layers_file_then_environment_then_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, {**BASE, "batch_size": 32, "platform": "local"})
    environ = {
        "FAASML_BATCH_SIZE": "64",
        "FAASML_OPTIMIZER__LR": "0.5",
        "FAASML_PLATFORM": "ray",
        "FAASML_HOME": "/somewhere",  # not a job field: left for other parts of faasml
    }
    job = load_job(path, {"platform": "lithops", "optimizer.momentum": 0.9}, environ=environ)
    assert job.batch_size == 64
    assert job.optimizer.hyperparameters == {"lr": 0.5, "momentum": 0.9}
    assert job.platform == "lithops"
    assert load_job(path, environ={}).batch_size == 32
    assert environment_overrides({"FAASML_TUNING__TRIALS": "8", "OTHER": "1"}) == {
        "tuning.trials": 8
    }


def test_names_stay_text_and_file_references_resolve_next_to_the_job(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    shutil.copy(load_workload("lr-higgs").path or "", tmp_path / "profiles" / "mine.yaml")
    path = _write(tmp_path, {**BASE, "profile": "profiles/mine.yaml", "catalog": "local"})
    job = load_job(path, environ={"FAASML_NAME": "123"})
    assert job.name == "123"
    assert job.profile == str((tmp_path / "profiles" / "mine.yaml").resolve())
    assert job.catalog == "local"


def test_a_user_module_factory_by_path(tmp_path: Path) -> None:
    model = {"name": "torch.nn:Linear", "in_features": 4, "out_features": 2}
    job = load_job(_write(tmp_path, {**BASE, "model": model}), environ={})
    train, _ = load_data(job.dataset)
    assert build_model(job.model, train.input_shape, train.num_classes).num_params == 10
    # Loading does not import a user's factory, so its options are checked once it is built.
    bad = load_job(_write(tmp_path, {**BASE, "model": {**model, "bias_": 1}}), environ={})
    with pytest.raises(ConfigError, match=r"model 'torch.nn:Linear' has no option.*bias_"):
        build_model(bad.model, train.input_shape, train.num_classes)


def test_model_shorthand_and_overrides_of_model_options(tmp_path: Path) -> None:
    job = load_job(_write(tmp_path, BASE), {"model.l2": 0.01}, environ={})
    assert job.model.name == "logistic-regression" and dict(job.model.options) == {"l2": 0.01}


def test_relative_dataset_path_resolves_next_to_the_job_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    write_higgs_csv(tmp_path / "data" / "h.csv", higgs_like(20, features=3))
    data = {**BASE, "dataset": {"path": "data/h.csv", "limit": 10, "test_fraction": 0.5}}
    job = load_job(_write(tmp_path, data), environ={})
    assert job.dataset.format == "higgs-csv"  # guessed from the suffix
    train, test = load_data(job.dataset)
    assert (len(train), len(test)) == (5, 5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "the value of name is '', but must be a non-empty string"),
        ({"batch_size": 0}, "the value of batch_size is 0, but must be >= 1"),
        ({"seed": 1.5}, "the value of seed is 1.5, but must be a whole number"),
        ({"colour": "red"}, "unknown field.*colour"),
        ({"model": "resnet-huge"}, "model.name is 'resnet-huge', but must be one of"),
        ({"model": {"name": "svm", "l3": 1}}, "model 'svm' has no option.*l3"),
        ({"model": {"name": "not a path:x y"}}, "module.path:factory"),
        ({"optimizer": {"name": "sgd"}}, "optimizer.lr is missing"),
        ({"optimizer": {"name": "sgd", "lr": -1}}, "optimizer.lr is -1, but must be > 0"),
        ({"optimizer": {"name": "lbfgs", "lr": 1}}, "optimizer.name is 'lbfgs', but must be one"),
        ({"dataset": {"samples": 10}}, "exactly one of synthetic"),
        ({"dataset": {"synthetic": "faces", "samples": 9}}, "dataset.synthetic is 'faces'"),
        ({"dataset": {"synthetic": "images", "samples": 9, "pixels": 3}}, "dataset has unknown"),
        ({"dataset": {"path": "nowhere.csv"}}, "dataset.path is 'nowhere.csv'.*existing file"),
        (
            {"dataset": {"synthetic": "images", "samples": 9, "test_fraction": 1}},
            "dataset.test_fraction is 1.0, but must be <= 0.9",
        ),
        ({"tuning": {"trials": 4}}, "tuning needs a search_space"),
        (
            {"model": {"name": "mlp", "hidden": [0]}},
            r"the value of model.hidden is 0, but must be an integer >= 1",
        ),
        ({"training": {"target_loss": 0}}, "training.target_loss is 0.0, but must be > 0"),
        ({"training": {"max_epochs": 0}}, "training.max_epochs is 0, but must be >= 1"),
        ({"store": "redis://user:s3cret@localhost:6379/0"}, "credentials never go in job files"),
        (
            {"stores": {"redis": "redis://user:s3cret@localhost:6379/0"}},
            "stores.redis holds a password.*FAASML_STORES__REDIS",
        ),
        ({"stores": {"redis": "localhost:6379"}}, "stores.redis is 'localhost:6379', but must be"),
        ({"stores": {"redis": "radish://x"}}, "stores.redis is 'radish://x'.*unknown scheme"),
        ({"store": "redis"}, "store is 'redis', but must be a store URL, a name under stores"),
        ({"store": "tape://x"}, "store is 'tape://x'.*unknown scheme"),
    ],
)
def test_errors_name_the_field_and_rule(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_job(_write(tmp_path, {**BASE, **change}), environ={})


SPACE = {"optimizer.lr": {"loguniform": [0.001, 1.0]}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"search_space": {"lr": {"normal": [0, 1]}}}, "distribution 'normal'"),
        ({"search_space": {"lr": {"loguniform": [0, 1]}}}, "must have low > 0"),
        ({"search_space": {"lr": {"uniform": [1, 1]}}}, "must have low < high"),
        ({"search_space": {"batch_size": {"int": [1.5, 4]}}}, "bounds must be integers"),
        ({"search_space": {"colour": {"choice": [1, 2]}}}, "hyperparameter 'colour'"),
        (
            {"search_space": {"optimizer.momentum": {"uniform": [0.0, 1.5]}}},
            "search_space.optimizer.momentum allows 1.5.*must be in \\[0, 1\\)",
        ),
        ({"search_space": {"model.depth": {"choice": [1]}}}, "no option.*depth"),
        ({"search_space": SPACE, "tuning": {"trials": 8, "reduction_factor": 1}}, ">= 2"),
        (
            {"search_space": SPACE, "tuning": {"trials": 8, "stages": 5}},
            "tuning.stages is 5, but must be <= 4",
        ),
        ({"search_space": SPACE, "tuning": {"trials": 8, "metric": "f 1"}}, "tuning.metric"),
        ({"search_space": SPACE, "tuning": {"trials": 8, "metric": "f1"}}, "tuning.mode is miss"),
        (
            {"search_space": SPACE, "tuning": {"trials": 8, "mode": "up"}},
            "tuning.mode is 'up', but must be one of: min, max",
        ),
    ],
)
def test_search_space_and_tuning_errors(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_job(_write(tmp_path, {**BASE, **change}), environ={})


def test_tuning_stages_default_and_shape(tmp_path: Path) -> None:
    data = {**BASE, "search_space": SPACE, "tuning": {"trials": 27, "reduction_factor": 3}}
    tuning = load_job(_write(tmp_path, data), environ={}).require_tuning()
    # The one default rule (faasml.models.shape): ⌊log_η trials⌋ stages of 2 epochs, so the
    # last stage still ranks η trials; one stage more (a single trial) only when asked for.
    assert tuning.stages == 3 and tuning.trials_per_stage == (27, 9, 3)
    assert tuning.epochs_per_stage == 2 and tuning.shape == SuccessiveHalving(27, 3)
    data["tuning"]["stages"] = 4
    tuning = load_job(_write(tmp_path, data), environ={}).require_tuning()
    assert tuning.trials_per_stage == (27, 9, 3, 1)
    with pytest.raises(ConfigError, match=r"no tuning section"):
        load_job(_write(tmp_path, BASE), environ={}).require_tuning()


def test_apply_config_applies_every_kind_of_key(tmp_path: Path) -> None:
    space = {
        "lr": {"loguniform": [0.01, 0.1]},
        "batch_size": {"int": [8, 16]},
        "model.l2": {"uniform": [0.0, 0.1]},
    }
    job = load_job(_write(tmp_path, {**BASE, "search_space": space}), environ={})
    trial = apply_config(job, {"lr": 0.05, "batch_size": 9, "model.l2": 0.02})
    assert trial.optimizer.hyperparameters["lr"] == 0.05
    assert trial.batch_size == 9 and trial.model.options["l2"] == 0.02
    assert job.batch_size == 64  # the original is unchanged
    assert trial.dataset == job.dataset


def test_the_jobs_stores_start_with_its_own_store(tmp_path: Path) -> None:
    stores = {"memcached": "memcached://127.0.0.1:11211", "redis": "redis://127.0.0.1:6379/0"}
    job = load_job(_write(tmp_path, {**BASE, "stores": stores}), environ={})
    assert list(job.sync_stores().items()) == [("embedded", None), *stores.items()]
    named = load_job(_write(tmp_path, {**BASE, "store": "redis", "stores": stores}), environ={})
    assert list(named.sync_stores()) == ["redis", "memcached"]
    url = load_job(_write(tmp_path, {**BASE, "store": stores["redis"]}), environ={})
    assert url.sync_stores() == {"redis": stores["redis"]}
    assert from_mapping(named.to_dict()).sync_stores() == named.sync_stores()


def test_store_credentials_from_the_environment_are_redacted(tmp_path: Path) -> None:
    url = "memcached://app:s3cret@127.0.0.1:11211"  # a Redis URL may hold none: REDISCLI_AUTH
    job = load_job(_write(tmp_path, BASE), environ={"FAASML_STORE": url})
    assert job.store == url
    assert job.to_dict()["store"] == "memcached://app:***@127.0.0.1:11211"
    assert "s3cret" not in yaml.safe_dump(job.to_dict())
    env = {"FAASML_STORES__MEMCACHED": url}
    assert load_job(_write(tmp_path, BASE), environ=env).to_dict()["stores"] == {
        "memcached": "memcached://app:***@127.0.0.1:11211"
    }
    bad = {"FAASML_STORES__REDIS": "radish://app:s3cret@127.0.0.1:6379/0"}
    with pytest.raises(ConfigError, match="unknown scheme 'radish'") as caught:
        load_job(_write(tmp_path, BASE), environ=bad)
    assert "s3cret" not in str(caught.value)
    assert redact_url("embedded") == "embedded"


@settings(max_examples=30, deadline=None)
@given(
    trials=st.integers(1, 64),
    eta=st.integers(2, 4),
    seed=st.integers(0, 10_000),
    batch=st.integers(1, 80),  # BASE has 80 training samples
)
def test_to_dict_round_trips(trials: int, eta: int, seed: int, batch: int) -> None:
    data = {
        **BASE,
        "seed": seed,
        "batch_size": batch,
        "search_space": {**SPACE, "model.l2": {"choice": [0.0, 0.1]}},
        "tuning": {"trials": trials, "reduction_factor": min(eta, max(2, trials))},
        "training": {"target_loss": 0.3},
    }
    job = from_mapping(data)
    again = from_mapping(job.to_dict())
    assert again == job
    assert again.sample_configs() == job.sample_configs()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), extra=st.integers(0, 10))
def test_sampling_is_seeded_within_bounds_and_prefix_stable(seed: int, n: int, extra: int) -> None:
    space = parse_search_space(
        {
            "lr": {"loguniform": [1e-4, 1.0]},
            "momentum": {"uniform": [0.0, 0.9]},
            "batch_size": {"int": [16, 64]},
            "model.hidden": {"choice": [[8], [16, 16]]},
        }
    )
    configs = space.sample(n, seed)
    assert configs == space.sample(n, seed)
    assert space.sample(n + extra, seed)[:n] == configs
    for config in configs:
        assert 1e-4 <= config["lr"] <= 1.0 and 0.0 <= config["momentum"] <= 0.9
        assert isinstance(config["batch_size"], int) and 16 <= config["batch_size"] <= 64
        assert config["model.hidden"] in ([8], [16, 16])
