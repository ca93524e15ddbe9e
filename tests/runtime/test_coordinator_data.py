"""The coordinator's data: a new data set under a new namespace (a workflow's next phase) gets
its own partitions, read back from the object store as workers read them."""

from __future__ import annotations

from pathlib import Path

from faasml.catalog import load_catalog
from faasml.job import from_mapping
from faasml.runtime.coordinator import Coordinator
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.function.worker import ModelRecipe
from faasml.runtime.platforms.contract import open_platform
from faasml.sync.stores import open_store
from faasml.workloads._dataset import dataset_from_bytes, partition
from faasml.workloads.build import load_data

JOB = {
    "name": "data-test",
    "model": "logistic-regression",
    "dataset": {"synthetic": "higgs-like", "samples": 600, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "batch_size": 50,
    "seed": 3,
}


def test_new_data_under_a_new_namespace_gets_its_own_partitions(tmp_path: Path) -> None:
    train, test = load_data(from_mapping(JOB).dataset)
    recipe = ModelRecipe(
        "logistic-regression", {}, train.input_shape, train.num_classes, "sgd", {}, 50, 3
    )
    catalog = load_catalog("local")
    objects = open_store(f"embedded://{tmp_path}/objects")
    with open_platform("local", catalog, cpu="none") as platform:
        coordinator = Coordinator(
            platform,
            catalog,
            Meter(catalog),
            objects,
            f"embedded://{tmp_path}/sync",
            lambda _: recipe,
            namespace="run/p0",
        )
        coordinator.set_data(train, test)
        coordinator.prepare_partitions(2)
        half = partition(train, 0, 2)
        coordinator.namespace = "run/p1"
        coordinator.set_data(half, test)
        coordinator.prepare_partitions(2)
        coordinator.close()
    assert coordinator.data_prefix == "run/p1/data"
    assert coordinator.samples == len(half) < len(train)
    assert objects.get("run/p1/data/n2/samples") == str(len(half)).encode()
    written = [objects.get(f"run/p1/data/n2/part-{w}") for w in range(2)]
    parts = [dataset_from_bytes(data) for data in written if data is not None]
    assert sum(len(p) for p in parts) == len(half)
    objects.close()
