from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from faasml.exceptions import UnknownNameError, WorkloadError
from faasml.workload import builtin_workloads, load_workload, parse_workload

TABLE_IV = {
    "lr-higgs",
    "svm-higgs",
    "lr-yfcc",
    "svm-yfcc",
    "mobilenet-cifar10",
    "resnet50-cifar10",
    "bert-imdb",
}


def profile_data(name: str = "mobilenet-cifar10") -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(Path(load_workload(name).path or "").read_text())
    return data


def test_every_table_iv_workload_ships_with_sources() -> None:
    assert set(builtin_workloads()) >= TABLE_IV
    for name in TABLE_IV:
        workload = load_workload(name)
        assert workload.sources, name
        assert workload.target_loss is not None
        assert workload.max_functions >= 1


def test_compute_profile_never_slower_with_more_memory() -> None:
    memory = np.arange(128, 10241, 64)
    for name in builtin_workloads():
        workload = load_workload(name)
        u = workload.compute.seconds_per_mb(memory / 1769, memory)
        assert np.all(np.diff(u) <= 1e-12), name
        assert np.all(u > 0)


def test_table_profile_is_interpolated_and_monotone(tmp_path: Path) -> None:
    data = profile_data()
    # A noisy measurement at 3008 MB is slower than at 2048 MB: the profile must not be.
    data["compute"] = {"model": "table", "points": [[1024, 4.0], [2048, 2.0], [3008, 2.5]]}
    workload = parse_workload(data)
    memory = np.array([512, 1024, 1536, 2048, 3008, 10240])
    u = workload.compute.seconds_per_mb(memory / 1769, memory)
    assert u[0] == pytest.approx(8.0)  # half the memory of the first point: twice the time
    assert u[1] == pytest.approx(4.0)
    assert 2.0 < u[2] < 4.0
    assert u[4] == pytest.approx(2.0) and u[5] == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["dataset"].pop("samples"), "dataset.samples is missing"),
        (lambda d: d.update(model_size_mb=0), "model_size_mb is 0"),
        (lambda d: d.update(batch_size=10**9), "must be <= dataset.samples"),
        (lambda d: d["compute"].update(parallel_fraction=1.5), "compute.parallel_fraction is 1.5"),
        (lambda d: d["compute"].update(model="gpu"), "compute.model is 'gpu'"),
        (lambda d: d.update(epoch=3), "unknown field"),
    ],
)
def test_bad_profile_fields_are_named(mutate: Any, message: str) -> None:
    data = copy.deepcopy(profile_data())
    mutate(data)
    with pytest.raises(WorkloadError, match=message):
        parse_workload(data)


def test_unknown_workload_lists_choices() -> None:
    with pytest.raises(UnknownNameError, match="lr-higgs"):
        load_workload("gpt-5")
