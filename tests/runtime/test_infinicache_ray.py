"""InfiniCache with its cache nodes on the Ray platform (``platform=ray``), on a real local
Ray session started for this module: the store contract, warm reuse of each node's actor
(its chunks stay in memory between invocations), losing up to p nodes, and the bill.
Data is tiny: Ray is slow to start on a busy machine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import open_platform
from faasml.runtime.platforms.ray import RayPlatform
from faasml.sync.stores import open_store
from faasml.sync.stores.infinicache import InfiniCache, parse_url
from faasml.testing.ray_cluster import local_ray_cluster
from faasml.testing.store_conformance import StoreConformance

pytest.importorskip("ray")
pytest.importorskip("zfec")

URL = "infinicache://?data=2&parity=1&nodes=3&memory=128&cpu=none&linger=60&warmup=600&platform=ray"


@pytest.fixture(scope="module")
def ray_cache() -> Iterator[InfiniCache]:
    """One Ray session (one node, 2 CPUs) and one deployment for the module."""
    with (
        local_ray_cluster(nodes=1, cpus_per_node=2),
        InfiniCache(parse_url(URL)[2], open_platform) as cache,
    ):
        yield cache


class TestInfiniCacheOnRay(StoreConformance):
    @pytest.fixture
    def store_url(self, ray_cache: InfiniCache) -> str:
        return ray_cache.url


def test_more_nodes_than_the_ray_session_holds_is_refused(ray_cache: InfiniCache) -> None:
    too_big = parse_url(URL.replace("memory=128", "memory=2048"))[2]  # 3 x 1.16 CPUs > 2
    with pytest.raises(ConfigError, match=r"nodes x CPUs is 3\.47 .*the Ray session has 2 CPUs"):
        InfiniCache(too_big, open_platform).start()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def test_nodes_are_ray_actors_that_keep_their_chunks_warm(ray_cache: InfiniCache) -> None:
    cache = ray_cache
    with open_store(cache.url) as store:
        store.put("ray/k", b"r" * 3000)
        nodes = cache.node_of("ray/k")
        assert all(isinstance(cache._slots[n].platform, RayPlatform) for n in nodes)
        for n in nodes:  # the node's process runs inside a Ray worker, not under this one
            assert _parent(cache._slots[n].pid) != os.getpid()
        instances = {n: cache._slots[n].instance for n in nodes}
        losses = cache.stats.node_losses
        cache.settle()  # every invocation returned: the actors are idle
        assert cache.connected() == 0
        cache.warm_up()  # new invocations reach the same warm actors, chunks in memory
        assert {n: cache._slots[n].instance for n in nodes} == instances
        assert cache.stats.node_losses == losses
        assert store.get("ray/k") == b"r" * 3000


def test_node_invocations_are_billed_with_the_catalog(ray_cache: InfiniCache) -> None:
    ray_cache.settle()
    bill: dict[str, Any] = ray_cache.bill()
    platform = load_catalog("local").platform
    assert bill["invocations"] >= ray_cache.options.nodes and bill["gb_s"] > 0
    assert bill["usd"] == pytest.approx(
        bill["gb_s"] * platform.price_per_gb_s + bill["invocations"] * platform.price_per_invocation
    )
    assert bill["usd"] > 0


def test_losing_up_to_p_nodes_on_ray_loses_no_data(ray_cache: InfiniCache) -> None:
    cache = ray_cache
    with open_store(cache.url) as store:
        values = {f"loss/{i}": os.urandom(2000 + i) for i in range(4)}
        for key, value in values.items():
            store.put(key, value)
        victim = cache.node_of("loss/0")[0]
        cache.kill_node(victim)  # its instance process inside the actor dies
        assert store.get("loss/0") == values["loss/0"]
        cache.warm_up()
        assert cache.wait_repaired(120)
        assert cache.stats.node_losses >= 1 and cache.stats.chunks_repaired >= 1
        assert cache.stats.objects_lost == 0
        for key, value in values.items():
            assert store.get(key) == value


def test_backup_moves_a_node_to_a_fresh_actor_that_stays_warm(ray_cache: InfiniCache) -> None:
    cache = ray_cache
    with open_store(cache.url) as store:
        store.put("moved", b"m" * 3000)
        node = cache.node_of("moved")[0]
        old, losses = cache._slots[node].instance, cache.stats.node_losses
        cache.backup(node)
        new = cache._slots[node].instance
        assert new != old and cache.stats.backups >= 1
        cache.settle()
        cache.warm_up()  # the node's next invocation reaches the fresh instance, not the old
        assert cache._slots[node].instance == new
        assert cache.stats.node_losses == losses
        assert store.get("moved") == b"m" * 3000
