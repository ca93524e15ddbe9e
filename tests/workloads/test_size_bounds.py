"""Models and generated data are bounded before they are built: a huge option fails at once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml._validate import MAX_DATA_VALUES, MAX_PARAMS
from faasml.exceptions import ConfigError
from faasml.job import load_job
from faasml.workloads import create_model
from faasml.workloads.data import generate_dataset
from faasml.workloads.nets import (
    mlp_params,
    mobilenet_params,
    resnet_params,
    transformer_params,
)

IMAGES: dict[str, Any] = {"synthetic": "images", "samples": 40, "size": 8}


def _job(tmp_path: Path, model: Any, dataset: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "job.yaml"
    data = {
        "name": "big",
        "model": model,
        "dataset": dataset or IMAGES,
        "optimizer": {"lr": 0.1},
        "batch_size": 4,
    }
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("name", "options", "shape", "classes", "count"),
    [
        ("mlp", {"hidden": [8, 4]}, (3, 4), 3, lambda: mlp_params(12, [8, 4], 3)),
        (
            "mobilenet-small",
            {"width": 4, "blocks": 3},
            (3, 8, 8),
            5,
            lambda: mobilenet_params(3, 4, 3, 5),
        ),
        (
            "resnet-small",
            {"width": 4, "blocks": [1, 2]},
            (3, 8, 8),
            5,
            lambda: resnet_params(3, 4, [1, 2], 5),
        ),
        (
            "resnet-small",
            {"width": 4, "blocks": [2, 1, 3]},
            (2, 8, 8),
            2,
            lambda: resnet_params(2, 4, [2, 1, 3], 2),
        ),
        (
            "transformer-small",
            {"vocab_size": 10, "d_model": 8, "heads": 2, "layers": 3, "feedforward": 6},
            (7,),
            2,
            lambda: transformer_params(7, 2, 10, 8, 3, 6),
        ),
    ],
)
def test_parameter_counts_match_the_built_models(
    name: str, options: dict[str, Any], shape: tuple[int, ...], classes: int, count: Any
) -> None:
    assert create_model(name, shape, classes, **options).num_params == count()


@pytest.mark.parametrize(
    "model",
    [
        {"name": "mobilenet-small", "blocks": 10**30},
        {"name": "mobilenet-small", "width": 10**6},
        {"name": "resnet-small", "blocks": [10**30]},
        {"name": "resnet-small", "blocks": [1] * 40},
        {"name": "mlp", "hidden": [10**9]},
        {"name": "mlp", "hidden": [4] * 100 + [10**5, 10**5]},
    ],
)
def test_huge_models_are_refused_before_they_are_built(tmp_path: Path, model: Any) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"may have at most 100,000,000 \(0.4 GB as float32\)"):
        load_job(_job(tmp_path, model), environ={})
    # A hang detector, not a timing test: building the model took minutes and gigabytes.
    assert time.monotonic() - started < 60


def test_huge_transformers_and_linear_models_are_refused(tmp_path: Path) -> None:
    sequences = {"synthetic": "sequences", "samples": 40, "length": 4}
    model = {"name": "transformer-small", "layers": 10**30}
    with pytest.raises(ConfigError, match=r"'transformer-small' .* would have about 10\^34"):
        load_job(_job(tmp_path, model, sequences), environ={})
    wide = {"synthetic": "images", "samples": 40, "size": 32, "classes": 40_000}
    with pytest.raises(ConfigError, match=r"'logistic-regression' would have 122,920,000"):
        load_job(_job(tmp_path, "logistic-regression", wide), environ={})


@pytest.mark.parametrize(
    ("dataset", "rule"),
    [
        ({"synthetic": "higgs-like", "samples": 10**30}, r"'higgs-like' \(samples about 10\^30"),
        ({"synthetic": "higgs-like", "samples": 10, "features": 10**7}, r"one sample of"),
        ({"synthetic": "images", "samples": 10**6, "size": 32}, r"'images' .*3,072,000,000 values"),
        ({"synthetic": "images", "samples": 10, "size": 10**5}, r"one sample of"),
        ({"synthetic": "sequences", "samples": 10**9, "length": 16}, r"'sequences'"),
        ({"synthetic": "sequences", "samples": 10, "vocab": 10**30}, r"<= 2\*\*62"),
    ],
)
def test_huge_generated_data_is_refused(tmp_path: Path, dataset: Any, rule: str) -> None:
    model = "transformer-small" if dataset["synthetic"] == "sequences" else "logistic-regression"
    with pytest.raises(ConfigError, match=rule):
        load_job(_job(tmp_path, model, dataset), environ={})


def test_the_limits_leave_room_for_the_usual_sizes() -> None:
    assert MAX_DATA_VALUES >= 50_000 * 3 * 32 * 32  # CIFAR-10's training set
    assert resnet_params(3, 64, [2, 2, 2], 10) <= MAX_PARAMS
    data = generate_dataset("images", 4, size=32)
    assert data.input_shape == (3, 32, 32)
