"""The Store conformance suite: every store implementation must pass it.

Use it from a test module by subclassing and naming the store with a ``store_url`` fixture::

    from faasml.testing.store_conformance import StoreConformance

    class TestRedisStore(StoreConformance):
        @pytest.fixture
        def store_url(self, redis_server) -> str:
            return redis_server.url

Each test works under a fresh key prefix, so one server can serve every test. The suite checks
the invariants of ``faasml.sync.stores._base``: atomic puts under concurrent writers and readers
in several processes, missing keys, delete by prefix, counted requests and bytes, large values,
sharing across processes and threads.
"""

from __future__ import annotations

import multiprocessing as mp
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import pytest

from faasml.sync.stores import Store, open_store

_HEADER = struct.Struct("<III")  # writer, sequence, payload length


def make_value(writer: int, sequence: int, length: int) -> bytes:
    """A self-describing value: a torn or mixed read cannot pass ``check_value``."""
    fill = (writer * 31 + sequence * 7 + 1) % 256
    return _HEADER.pack(writer, sequence, length) + bytes([fill]) * length


def check_value(value: bytes) -> tuple[int, int]:
    """(writer, sequence) of a whole value made by ``make_value``; ValueError if torn."""
    if len(value) < _HEADER.size:
        raise ValueError(f"value of {len(value)} bytes is shorter than its header")
    writer, sequence, length = _HEADER.unpack_from(value)
    if len(value) != _HEADER.size + length:
        raise ValueError(f"value says {length} payload bytes but has {len(value) - _HEADER.size}")
    fill = (writer * 31 + sequence * 7 + 1) % 256
    if value[_HEADER.size :] != bytes([fill]) * length:
        raise ValueError(f"payload of writer {writer} sequence {sequence} is mixed")
    return writer, sequence


def _write_many(
    url: str, key: str, writer: int, count: int, unit: int, wait_for: tuple[str, ...]
) -> int:
    with open_store(url) as store:
        for ready in wait_for:  # start once the readers read
            store.wait_get(ready, timeout_s=60)
        for sequence in range(count):
            store.put(key, make_value(writer, sequence, unit * (1 + (sequence + writer) % 5)))
    return count


def _read_until(url: str, key: str, stop_key: str, ready_key: str, limit_s: float) -> int:
    """Read ``key`` until ``stop_key`` appears; every value seen must be whole. Returns reads."""
    seen = 0
    end = time.monotonic() + limit_s
    with open_store(url) as store:
        store.put(ready_key, b"1")
        while time.monotonic() < end:
            value = store.get(key)
            if value is not None:
                check_value(value)
                seen += 1
            if store.get(stop_key) is not None:
                break
    return seen


def _put_one(url: str, key: str, value: bytes) -> None:
    with open_store(url) as store:
        store.put(key, value)


def _get_one(url: str, key: str) -> bytes | None:
    with open_store(url) as store:
        return store.get(key)


class StoreConformance:
    """Tests any Store must pass; subclasses provide the ``store_url`` fixture."""

    large_value_bytes = 12 * 2**20
    """The large-value test's size: the 12 MB model of the sync benchmark."""

    @pytest.fixture
    def store_url(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError("define a store_url fixture in the subclass")

    @pytest.fixture
    def store(self, store_url: str) -> Iterator[Store]:
        with open_store(store_url) as store:
            yield store

    @pytest.fixture
    def prefix(self) -> str:
        return f"conformance-{uuid.uuid4().hex[:10]}/"

    def test_missing_key_is_none(self, store: Store, prefix: str) -> None:
        assert store.get(prefix + "absent") is None
        assert store.delete(prefix + "absent") == 0

    def test_put_get_overwrite(self, store: Store, prefix: str) -> None:
        every_byte = bytes(range(256)) * 3
        store.put(prefix + "k", every_byte)
        assert store.get(prefix + "k") == every_byte
        store.put(prefix + "k", b"second")
        assert store.get(prefix + "k") == b"second"
        store.put(prefix + "empty", b"")
        assert store.get(prefix + "empty") == b""

    def test_keys_with_slashes_and_odd_characters(self, store: Store, prefix: str) -> None:
        keys = [prefix + "a/b/c", prefix + "a%2Fb", prefix + "é-ü=1,2@x", prefix + "a/b"]
        for i, key in enumerate(keys):
            store.put(key, bytes([i]) * (i + 1))
        for i, key in enumerate(keys):
            assert store.get(key) == bytes([i]) * (i + 1), key

    def test_delete_by_prefix(self, store: Store, prefix: str) -> None:
        for key in ("r/1/a", "r/1/b", "r/10/a", "r/2/a", "s/1/a"):
            store.put(prefix + key, key.encode())
        assert store.delete(prefix + "r/1/") == 2
        assert store.get(prefix + "r/1/a") is None
        assert store.get(prefix + "r/10/a") == b"r/10/a"
        assert store.delete(prefix + "r/") == 2
        assert store.get(prefix + "s/1/a") == b"s/1/a"
        assert store.delete(prefix + "r/") == 0
        assert store.delete(prefix) == 1

    def test_requests_and_bytes_are_counted(self, store: Store, prefix: str) -> None:
        before = store.stats.copy()
        store.put(prefix + "a", b"x" * 1000)
        store.put(prefix + "b", b"y" * 24)
        assert store.get(prefix + "a") == b"x" * 1000
        assert store.get(prefix + "missing") is None
        store.delete(prefix)
        after = store.stats
        assert after.puts - before.puts >= 2
        assert after.gets - before.gets >= 2
        assert after.deletes - before.deletes >= 1
        assert after.bytes_written - before.bytes_written == 1024
        assert after.bytes_read - before.bytes_read == 1000

    def test_large_value(self, store: Store, prefix: str) -> None:
        value = bytes(range(251)) * (self.large_value_bytes // 251 + 1)
        store.put(prefix + "big", value)
        assert store.get(prefix + "big") == value
        smaller = value[: len(value) // 3]
        store.put(prefix + "big", smaller)
        assert store.get(prefix + "big") == smaller
        assert store.delete(prefix) >= 1
        assert store.get(prefix + "big") is None

    def test_wait_get(self, store: Store, prefix: str) -> None:
        with pytest.raises(TimeoutError):
            store.wait_get(prefix + "never", timeout_s=0.05)
        timer = threading.Timer(0.05, store.put, (prefix + "later", b"here"))
        timer.start()
        try:
            assert store.wait_get(prefix + "later", timeout_s=10) == b"here"
        finally:
            timer.join()

    def test_shared_by_threads(self, store: Store, prefix: str) -> None:
        def work(t: int) -> None:
            for i in range(20):
                store.put(f"{prefix}{t}/{i}", make_value(t, i, 100 + i))
                check_value(store.get(f"{prefix}{t}/{i}") or b"")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert store.delete(prefix) == 80

    def test_shared_across_processes(self, store_url: str, store: Store, prefix: str) -> None:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
            pool.submit(_put_one, store_url, prefix + "from-child", b"child").result(60)
            store.put(prefix + "from-parent", b"parent")
            assert pool.submit(_get_one, store_url, prefix + "from-parent").result(60) == (
                b"parent"
            )
        assert store.get(prefix + "from-child") == b"child"

    def test_atomic_under_concurrent_processes(
        self, store_url: str, store: Store, prefix: str
    ) -> None:
        """Two writer processes overwrite one key with values of varying size while two
        reader processes read it: every value read is whole, never torn or mixed."""
        key, stop = prefix + "contended", prefix + "stop"
        store.put(key, make_value(9, 0, 10))
        with ProcessPoolExecutor(4, mp_context=mp.get_context("spawn")) as pool:
            ready = tuple(f"{prefix}ready/{r}" for r in range(2))
            readers = [pool.submit(_read_until, store_url, key, stop, r, 60.0) for r in ready]
            writers = [
                pool.submit(_write_many, store_url, key, w, 30, 50_000, ready) for w in range(2)
            ]
            assert [w.result(120) for w in writers] == [30, 30]
            store.put(stop, b"1")
            reads = [r.result(120) for r in readers]
        assert all(r >= 1 for r in reads)
        writer, sequence = check_value(store.get(key) or b"")
        assert sequence == 29 and writer in (0, 1)
