"""InfiniCache: the store contract, erasure coding, node loss and repair, billing, bad options.

Cache nodes are real function invocations on the local platform (processes holding chunks in
memory, serving the proxy over loopback). Nodes here run with ``cpu=none`` so that tests do
not wait on the CPU-share throttle of tiny functions.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import open_platform
from faasml.sync.stores import open_store
from faasml.sync.stores.infinicache import InfiniCache, InfiniCacheStore, Options, _codec, parse_url
from faasml.sync.stores.infinicache._ring import HashRing
from faasml.testing.store_conformance import StoreConformance

pytest.importorskip("zfec")

SMALL = Options(data=2, parity=1, nodes=4, memory=256, cpu="none", linger=60, warmup=600)
HOSTS = ("_template", "_host")
"""What a function instance runs: forked from the template, or a new process."""


@pytest.fixture(scope="module")
def shared_cache() -> Iterator[InfiniCache]:
    with InfiniCache(SMALL, open_platform) as cache:
        yield cache


class TestInfiniCacheStore(StoreConformance):
    @pytest.fixture
    def store_url(self, shared_cache: InfiniCache) -> str:
        return shared_cache.url


@pytest.fixture
def cache() -> Iterator[InfiniCache]:
    """A deployment of its own for a test that kills nodes (three nodes: quicker to start)."""
    with InfiniCache(replace(SMALL, nodes=3), open_platform) as cache:
        yield cache


@pytest.fixture
def store(cache: InfiniCache) -> Iterator[InfiniCacheStore]:
    store = open_store(cache.url)
    assert isinstance(store, InfiniCacheStore)
    with store:
        yield store


# --------------------------------------------------------------------- coding (pure)


@settings(max_examples=60, deadline=None)
@given(
    value=st.binary(max_size=3000),
    data=st.integers(1, 6),
    parity=st.integers(0, 3),
    pick=st.randoms(use_true_random=False),
)
def test_any_d_chunks_give_the_object_back(
    value: bytes, data: int, parity: int, pick: object
) -> None:
    coded = _codec.encode(value, data, parity)
    assert len(coded.chunks) == data + parity
    assert {len(c) for c in coded.chunks} == {coded.chunk_size}
    chosen = pick.sample(range(data + parity), data)  # type: ignore[attr-defined]
    chunks = {i: coded.chunks[i] for i in chosen}
    assert _codec.decode(chunks, data, parity, len(value), coded.digest) == value
    missing = [i for i in range(data + parity) if i not in chosen]
    assert _codec.rebuild(chunks, data, parity, missing) == [coded.chunks[i] for i in missing]


@settings(max_examples=40, deadline=None)
@given(value=st.binary(min_size=1, max_size=2000), flip=st.integers(0, 10**6))
def test_a_damaged_chunk_never_decodes_into_wrong_bytes(value: bytes, flip: int) -> None:
    coded = _codec.encode(value, 3, 2)
    chunks = {i: coded.chunks[i] for i in (0, 3, 4)}
    damaged = bytearray(chunks[3])
    damaged[flip % len(damaged)] ^= 0xFF
    chunks[3] = bytes(damaged)
    assert _codec.crc(chunks[3]) != coded.crcs[3]
    with contextlib.suppress(_codec.CodingError):  # damage to padding only: right bytes
        assert _codec.decode(chunks, 3, 2, len(value), coded.digest) == value
    chunks[0] = bytes(b ^ 0xFF for b in chunks[0])  # block 0 always carries data
    with pytest.raises(_codec.CodingError, match="does not match its digest"):
        _codec.decode(chunks, 3, 2, len(value), coded.digest)
    with pytest.raises(_codec.CodingError, match="cannot give back"):
        _codec.decode({0: coded.chunks[0]}, 3, 2, len(value), coded.digest)


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.text(max_size=20), min_size=1, max_size=30), count=st.integers(1, 6))
def test_consistent_hashing_places_on_distinct_nodes_and_moves_little(
    keys: list[str], count: int
) -> None:
    ring = HashRing(list(range(8)))
    grown = HashRing(list(range(9)))
    for key in keys:
        nodes = ring.place(key, count)
        assert len(set(nodes)) == count and nodes == ring.place(key, count)
        # A ninth node joins an object's nodes or not; the old ones stay, less at most one.
        after = grown.place(key, count)
        kept = [n for n in after if n != 8]
        assert kept == nodes[: len(kept)] and len(kept) >= count - 1


# --------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("infinicache://?data=0", "data is 0, but must be at least 1"),
        ("infinicache://?parity=4&nodes=4", r"parity is 4, but must be below nodes \(4\)"),
        ("infinicache://?data=4&parity=2&nodes=5", "data \\+ parity is 6, but each chunk"),
        ("infinicache://?memory=96", "memory is 96 MB, but a node needs more than"),
        ("infinicache://?colour=red", "option 'colour' is unknown"),
        ("infinicache://?data=two", "option data is 'two', but must be a whole number"),
        ("infinicache://?linger=0", "linger is 0.0, but must be above 0"),
        ("infinicache://?platform=k8s", "cache nodes run on 'local' or 'ray'"),
        ("infinicache://127.0.0.1:1?data=3", "give only infinicache://host:port"),
        ("infinicache://127.0.0.1", "must look like infinicache://host:port"),
    ],
)
def test_bad_urls_name_the_value_and_the_rule(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        open_store(url)
    assert "\n" not in str(caught.value)


def test_more_node_memory_than_the_platform_holds_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"nodes x memory is 409600 MB, but the local platform"):
        InfiniCache(Options(data=2, parity=1, nodes=400, memory=1024), open_platform)


def test_url_options_are_read() -> None:
    host, port, options = parse_url("infinicache://?data=10&parity=2&nodes=12&memory=1536")
    assert (host, port) == (None, None)
    assert (options.data, options.parity, options.nodes, options.memory) == (10, 2, 12, 1536)
    assert parse_url("infinicache://127.0.0.1:7000")[:2] == ("127.0.0.1", 7000)


def test_an_object_whose_chunk_exceeds_a_node_is_refused(shared_cache: InfiniCache) -> None:
    capacity = SMALL.node_capacity_bytes
    size = capacity * SMALL.data + SMALL.data * 1024
    with (
        open_store(shared_cache.url) as store,
        pytest.raises(ConfigError, match=f"a node of 256 MB holds at most {capacity} bytes"),
    ):
        store.put("too-big", b"\0" * size)


# --------------------------------------------------------------------- nodes


def test_nodes_are_function_processes_that_hold_the_chunks(shared_cache: InfiniCache) -> None:
    cache = shared_cache
    with open_store(cache.url) as store:
        store.put("processes/k", b"v" * 1000)
    nodes = cache.node_of("processes/k")
    assert len(set(nodes)) == SMALL.chunks
    pids = {cache._slots[n].pid for n in nodes}
    assert len(pids) == SMALL.chunks and os.getpid() not in pids
    for pid in pids:  # each a live local-platform function instance (forked or started)
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            command = fh.read()
        assert any(f"faasml.runtime.platforms.{m}".encode() in command for m in HOSTS)
    assert all("processes/k" in {e[0] for e in cache._slots[n].chunks.values()} for n in nodes)


def test_losing_up_to_p_nodes_loses_no_data_and_is_repaired(
    cache: InfiniCache, store: InfiniCacheStore
) -> None:
    values = {f"obj/{i}": os.urandom(20_000 + i) for i in range(8)}
    for key, value in values.items():
        store.put(key, value)
    victim = cache.node_of("obj/0")[0]
    cache.kill_node(victim)
    assert store.get("obj/0") == values["obj/0"]  # decoded from the other d chunks
    cache.warm_up()  # a keep-alive finds the fresh instance without its chunks
    assert cache.wait_repaired(60)
    assert cache.stats.node_losses >= 1 and cache.stats.chunks_repaired >= 1
    assert cache.stats.objects_lost == 0
    # Repaired: another node of the same object can go now, and still nothing is lost.
    second = next(n for n in cache.node_of("obj/0") if n != victim)
    cache.kill_node(second)
    for key, value in values.items():
        assert store.get(key) == value


def test_a_node_killed_while_idle_is_found_at_its_next_invocation(
    cache: InfiniCache, store: InfiniCacheStore
) -> None:
    store.put("idle", b"x" * 5000)
    cache.settle()  # every node invocation returned: the instances are idle, warm
    victim = cache.node_of("idle")[1]
    cache.kill_node(victim)
    cache.warm_up()
    assert cache.wait_repaired(60)
    assert cache.stats.chunks_repaired >= 1
    assert store.get("idle") == b"x" * 5000


def test_losing_more_than_p_nodes_is_a_clear_miss(
    cache: InfiniCache, store: InfiniCacheStore
) -> None:
    store.put("fragile", b"f" * 9000)
    store.put("other", b"o" * 10)
    for node in cache.node_of("fragile")[: SMALL.parity + 1]:
        cache.kill_node(node)
    assert store.get("fragile") is None  # never wrong bytes
    assert cache.stats.objects_lost >= 1
    assert store.get("fragile") is None
    store.put("fragile", b"again")  # the cache takes new values at once
    assert store.get("fragile") == b"again"


def test_backup_moves_a_node_to_a_fresh_instance(
    cache: InfiniCache, store: InfiniCacheStore
) -> None:
    store.put("moved", b"m" * 7000)
    node = cache.node_of("moved")[0]
    old_pid = cache._slots[node].pid
    cache.backup(node)
    assert cache._slots[node].pid != old_pid
    assert cache.stats.backups == 1 and cache.stats.chunks_lost == 0
    cache.kill_node(cache.node_of("moved")[1])  # p gone: the moved chunk is needed now
    assert store.get("moved") == b"m" * 7000
    assert cache.stats.objects_lost == 0


def test_a_node_returns_once_idle_for_linger_seconds() -> None:
    options = Options(data=1, parity=1, nodes=2, memory=128, cpu="none", linger=0.2)
    with InfiniCache(options, open_platform) as cache, open_store(cache.url) as store:
        store.put("kept", b"k" * 3000)
        assert cache.wait_until(lambda c: c.connected() == 0, 60)  # linger ran out
        assert cache.wait_until(lambda c: c.stats.invocations >= 4, 60)  # and was billed
        assert store.get("kept") == b"k" * 3000


def test_the_keeper_keeps_idle_nodes_warm_and_backs_them_up() -> None:
    """warmup and lifetime on a short schedule: every event is waited for."""
    options = Options(
        data=1, parity=1, nodes=2, memory=128, cpu="none", linger=0.2, warmup=0.5, lifetime=2
    )
    with InfiniCache(options, open_platform) as cache, open_store(cache.url) as store:
        store.put("kept", b"k" * 3000)
        warmups = cache.stats.warmups
        assert cache.wait_until(lambda c: c.stats.warmups >= warmups + 2, 60)
        assert cache.wait_until(lambda c: c.stats.backups >= 2, 60)  # both nodes moved
        assert cache.stats.chunks_lost == 0, cache.stats
        assert store.get("kept") == b"k" * 3000


def test_full_nodes_evict_the_least_recently_used_object() -> None:
    options = Options(data=1, parity=1, nodes=2, memory=128, cpu="none", linger=60)
    with InfiniCache(options, open_platform) as cache, open_store(cache.url) as store:
        third = options.node_capacity_bytes // 3 + 1
        for key in ("a", "b", "c"):
            store.put(key, bytes([ord(key)]) * third)
            if key == "b":
                assert store.get("a") is not None  # a is now more recent than b
        assert store.get("b") is None
        assert store.get("a") == b"a" * third and store.get("c") == b"c" * third
        assert cache.stats.objects_evicted == 1


# --------------------------------------------------------------------- billing


def test_every_node_invocation_is_billed_with_the_catalog(
    cache: InfiniCache, store: InfiniCacheStore
) -> None:
    store.put("b", b"1" * 100)
    cache.settle()
    before = cache.bill()
    assert before["invocations"] >= cache.options.nodes  # the start's keep-alives, the PUT's
    cache.warm_up()  # keep-alive invocations are billed too
    cache.settle()
    bill = cache.bill()
    platform = load_catalog("local").platform
    assert bill["invocations"] == before["invocations"] + cache.options.nodes
    assert bill["gb_s"] > 0
    assert bill["function_usd"] == pytest.approx(bill["gb_s"] * platform.price_per_gb_s)
    assert bill["invocation_usd"] == pytest.approx(
        bill["invocations"] * platform.price_per_invocation
    )
    assert bill["usd"] == pytest.approx(bill["function_usd"] + bill["invocation_usd"])


def test_opening_a_url_without_host_starts_nothing_and_says_what_does() -> None:
    url = "infinicache://?data=1&parity=1&nodes=2&memory=128&cpu=none"
    with pytest.raises(ConfigError, match="asks for a new InfiniCache deployment") as caught:
        open_store(url)
    assert "start_infinicache" in str(caught.value) and "\n" not in str(caught.value)


def test_a_store_that_starts_its_deployment_stops_it() -> None:
    options = parse_url("infinicache://?data=1&parity=1&nodes=2&memory=128&cpu=none")[2]
    with InfiniCacheStore.start(options, open_platform) as store:
        assert store.deployment is not None
        assert store.url.startswith("infinicache://127.0.0.1:")
        store.put("k", b"v")
        with open_store(store.url) as joined:
            assert joined.get("k") == b"v"
        pids = [slot.pid for slot in store.deployment._slots]
    for pid in pids:  # the nodes ended with the store
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] == "Z"


def test_a_deployment_runs_as_its_own_process_and_prints_its_bill() -> None:
    import subprocess
    import sys

    url = "infinicache://?data=1&parity=1&nodes=2&memory=128&cpu=none"
    cmd = [sys.executable, "-m", "faasml.runtime.platforms.infinicache", url]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline().split()
            assert line[:2] == ["faasml-infinicache", "listening"], line
            with open_store(line[2]) as store:
                store.put("k", b"from another process")
                assert store.get("k") == b"from another process"
        finally:
            process.terminate()
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "faasml-infinicache stopped:" in out and " USD" in out


def test_the_server_refuses_bad_options_in_one_line() -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "faasml.runtime.platforms.infinicache", "infinicache://?data=0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: infinicache data is 0, but must be at least 1"
