"""The service-backed stores pass the conformance suite against real servers on loopback."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest

from faasml.exceptions import ConfigError, StoreUnavailableError
from faasml.sync.stores import open_store
from faasml.testing.servers import LocalServer, MotoServer
from faasml.testing.store_conformance import StoreConformance

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoServer]:
    server = MotoServer()
    if not server.available():
        pytest.skip("moto is not installed (pip install 'moto[server]')")
    with server:
        yield server


class TestRedisStore(StoreConformance):
    @pytest.fixture
    def store_url(self, redis_server: LocalServer) -> str:
        return redis_server.url


class TestMemcachedStore(StoreConformance):
    @pytest.fixture
    def store_url(self, memcached_server: LocalServer) -> str:
        return memcached_server.url


class TestMemcachedChunkedStore(StoreConformance):
    """A default-sized (-I 1m) server: values above it go in chunks."""

    @pytest.fixture
    def store_url(self, small_item_memcached: LocalServer) -> str:
        return small_item_memcached.url


class TestS3Store(StoreConformance):
    @pytest.fixture
    def store_url(self, moto_server: MotoServer) -> str:
        return moto_server.s3_url("faasml-conformance")


class TestDynamoDBStore(StoreConformance):
    large_value_bytes = 4 * 2**20  # still 11 chunk items; moto is slow with more

    @pytest.fixture
    def store_url(self, moto_server: MotoServer) -> str:
        return moto_server.dynamodb_url("faasml-conformance")


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:{port}/0", "memcached://127.0.0.1:{port}"],
)
def test_unreachable_server_names_the_endpoint(url: str) -> None:
    from faasml.testing.servers import free_port

    port = free_port()
    with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}"):
        store = open_store(url.format(port=port))
        store.get("k")


def test_unreachable_s3_and_dynamodb_name_the_endpoint(moto_server: MotoServer) -> None:
    from faasml.testing.servers import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"
    for url in (f"s3://b?endpoint_url={endpoint}", f"dynamodb://t?endpoint_url={endpoint}"):
        with pytest.raises(StoreUnavailableError, match=endpoint):
            open_store(url).get("k")


def test_credentials_never_in_urls() -> None:
    with pytest.raises(ConfigError, match="REDISCLI_AUTH"):
        open_store("redis://user:secret@127.0.0.1:6379/0")


def test_missing_bucket_or_table_says_which(moto_server: MotoServer) -> None:
    name = f"absent-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigError, match=name):
        open_store(f"s3://{name}?endpoint_url={moto_server.url}&region=us-east-1").get("k")
    with pytest.raises(ConfigError, match=name):
        open_store(f"dynamodb://{name}?endpoint_url={moto_server.url}&region=us-east-1").get("k")


@pytest.mark.parametrize("server", ["redis_server", "memcached_server"])
def test_scatter_reduce_over_cache_servers(server: str, request: pytest.FixtureRequest) -> None:
    """Concurrent per-round cleanup included (memcached serialises its key listings)."""
    from faasml.sync.harness import digest, expected_mean, run_reduce

    url = request.getfixturevalue(server).url
    run = run_reduce(url, "scatter-reduce", 4, 1001, rounds=3, seed=3)
    assert run.errors() == {}
    assert {o.digests[2] for o in run.outcomes} == {digest(expected_mean(3, 4, 2, 1001))}


def test_a_server_never_takes_a_port_another_program_listens_on() -> None:
    """With several test sessions on one machine, another program can listen on the port a
    server was to use: the server must come up on another port, not hand out the other
    program's address because something answers there (issue 12)."""
    from faasml.testing.servers import RedisServer

    if not RedisServer.available():
        pytest.skip("'redis-server' is not installed (apt-get install redis-server)")
    redis = pytest.importorskip("redis")
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        with RedisServer(port=taken) as server:
            assert server.port != taken
            client = redis.Redis.from_url(server.url, socket_timeout=5)
            try:
                assert client.ping()
            finally:
                client.close()
