"""The Ray platform passes the platform conformance suite on a real 2-node local Ray cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.runtime.platforms.contract import Platform, open_platform
from faasml.testing.platform_conformance import *  # noqa: F403
from faasml.testing.ray_cluster import local_ray_cluster

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head node and a second node, 2 CPUs each; shut down after the module."""
    with local_ray_cluster(nodes=2, cpus_per_node=2) as started:
        yield started


@pytest.fixture(scope="module")
def platform(cluster: Any) -> Iterator[Platform]:
    opened = open_platform("ray", load_catalog("local"), address=cluster.address)
    # The cluster's first worker processes take seconds to start on a loaded machine; one
    # call first keeps that out of the suite's 10-second cancel window.
    assert opened.invoke("faasml.testing.functions:echo", 0, 256).result(timeout=120) == 0
    yield opened
    opened.close()


def test_the_cluster_has_two_nodes(cluster: Any) -> None:
    alive = [node for node in ray.nodes() if node["Alive"]]
    assert len(alive) == 2


def test_functions_are_sized_by_memory(platform: Platform) -> None:
    """A new 1769 MB function reserves 1 CPU (memory / 1769 MB) and 1769 MB of Ray memory."""
    fn = "faasml.testing.functions:sleep"
    assert platform.invoke(fn, 0.0, 1769).result(timeout=60) == 0.0  # one warm, idle
    time.sleep(1.0)
    before = ray.available_resources()
    busy = [platform.invoke(fn, 3.0, 1769) for _ in range(2)]  # warm one + one new actor
    deadline = time.monotonic() + 30
    used_cpu = used_mb = 0.0
    while time.monotonic() < deadline and used_cpu < 0.99:
        time.sleep(0.2)
        after = ray.available_resources()
        used_cpu = before.get("CPU", 0.0) - after.get("CPU", 0.0)
        used_mb = (before.get("memory", 0.0) - after.get("memory", 0.0)) / 2**20
    assert used_cpu == pytest.approx(1.0, abs=0.01)
    assert used_mb == pytest.approx(1769, abs=1)
    assert [b.result(timeout=60) for b in busy] == [3.0, 3.0]


def test_a_full_cluster_refuses_with_capacity_error(platform: Platform) -> None:
    from faasml.runtime.platforms.contract import CapacityError

    running = [platform.invoke("faasml.testing.functions:sleep", 3.0, 1769) for _ in range(2)]
    with pytest.raises(CapacityError, match="full"):
        for _ in range(6):
            running.append(platform.invoke("faasml.testing.functions:sleep", 3.0, 1769))
    for invocation in running:
        invocation.cancel()


def test_a_torch_allocation_past_the_memory_size_is_out_of_memory(platform: Platform) -> None:
    """torch's allocator fails with RuntimeError, not MemoryError: still an out-of-memory."""
    pytest.importorskip("torch")
    from faasml.runtime.platforms.contract import FunctionError

    invocation = platform.invoke("faasml.testing.functions:allocate_tensor", 8 * 1024, 1024)
    with pytest.raises(FunctionError) as caught:
        invocation.result(timeout=120)
    assert caught.value.kind == "out-of-memory", caught.value
    assert "can't allocate memory" in str(caught.value)
