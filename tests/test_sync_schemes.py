from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from faasml.exceptions import ConfigError, StoreUnavailableError
from faasml.sync import SCHEME_CLASSES, open_store
from faasml.sync.harness import digest, expected_mean, run_reduce
from faasml.sync.param_server import ParameterServer, ParameterServerStore
from faasml.sync.schemes._base import mean_of, shard_bounds

SIZE = 10_001  # not a multiple of the worker count: uneven shards


@pytest.fixture(scope="module")
def param_server() -> Iterator[ParameterServer]:
    with ParameterServer() as server:
        yield server


def _url(scheme: str, tmp_path: Path, param_server: ParameterServer) -> str:
    return param_server.url if scheme == "param-server" else f"embedded://{tmp_path}"


@pytest.mark.parametrize("scheme", ["allreduce", "scatter-reduce", "param-server"])
def test_every_worker_gets_the_exact_mean(
    scheme: str, tmp_path: Path, param_server: ParameterServer
) -> None:
    n, rounds = 4, 3
    run = run_reduce(_url(scheme, tmp_path, param_server), scheme, n, SIZE, rounds, seed=7)
    assert run.errors() == {}
    for r in range(rounds):
        want = digest(expected_mean(7, n, r, SIZE))
        assert [o.digests[r] for o in run.outcomes] == [want] * n
    stats = run.total_stats()
    model = SIZE * 4
    if scheme == "param-server":  # every worker pushes and pulls the model once
        assert (stats.bytes_written, stats.bytes_read) == (rounds * n * model,) * 2
    else:  # CE-scaling eq. 3: 3n − 2 model transfers per round through the store
        assert stats.bytes_written + stats.bytes_read == rounds * (3 * n - 2) * model
    if scheme != "param-server":  # finished rounds are cleaned up as the run goes
        assert len(list(tmp_path.iterdir())) <= 2 * n * n


@pytest.mark.parametrize("scheme", ["allreduce", "scatter-reduce"])
def test_one_worker_gets_the_float64_mean_bit_for_bit_without_the_store(
    scheme: str, tmp_path: Path
) -> None:
    """n = 1 copies the gradient instead of summing it in float64: the same bytes (tiny,
    huge, negative zero, infinities and NaN included), a fresh array, no store request."""
    store = open_store(f"embedded://{tmp_path}")
    rng = np.random.default_rng(3)
    gradient = (rng.standard_normal(SIZE) * 10.0 ** rng.integers(-40, 38, SIZE)).astype(np.float32)
    gradient[:5] = [-0.0, np.inf, -np.inf, np.nan, np.finfo(np.float32).tiny / 4]
    one = SCHEME_CLASSES.get(scheme)(store, 1, "ns")
    mean = one.reduce(0, 0, gradient)
    assert mean.dtype == np.float32
    assert mean.tobytes() == mean_of([gradient]).tobytes()
    assert mean is not gradient and not np.shares_memory(mean, gradient)
    assert (store.stats.puts, store.stats.gets) == (0, 0)


@pytest.mark.parametrize("scheme", ["allreduce", "scatter-reduce", "param-server"])
def test_a_missing_worker_makes_the_others_time_out(
    scheme: str, tmp_path: Path, param_server: ParameterServer
) -> None:
    run = run_reduce(
        _url(scheme, tmp_path, param_server), scheme, 3, 100, timeout_s=1.0, absent=[1]
    )
    errors = run.errors()
    assert sorted(errors) == [0, 2]
    assert all(e.startswith("TimeoutError") for e in errors.values())


@pytest.mark.parametrize("scheme", ["allreduce", "scatter-reduce"])
def test_one_worker_and_bad_arguments(scheme: str, tmp_path: Path) -> None:
    store = open_store(f"embedded://{tmp_path}")
    gradient = np.arange(5, dtype=np.float32)
    one = SCHEME_CLASSES.get(scheme)(store, 1, "ns")
    assert np.array_equal(one.reduce(0, 0, gradient), gradient)
    two = SCHEME_CLASSES.get(scheme)(store, 2, "ns")
    with pytest.raises(ConfigError, match=r"worker_id is 2, but must be in \[0, 2\)"):
        two.reduce(2, 0, gradient)
    with pytest.raises(ConfigError, match="must be flat"):
        two.reduce(0, 0, gradient.reshape(5, 1))
    with pytest.raises(ConfigError, match="n_workers is 0"):
        SCHEME_CLASSES.get(scheme)(store, 0, "ns")


def test_param_server_scheme_needs_a_parameter_server_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a parameter-server store"):
        SCHEME_CLASSES.get("param-server")(open_store(f"embedded://{tmp_path}"), 2, "ns")


def test_unreachable_parameter_server_names_the_endpoint() -> None:
    with ParameterServer() as server:
        url = server.url
    store = ParameterServerStore.from_url(url)
    store.retries = 1
    with pytest.raises(StoreUnavailableError, match=url.removeprefix("ps://")):
        store.get("k")


def test_shards_cover_the_gradient_and_differ_by_at_most_one() -> None:
    for length in (0, 1, 7, 10_001):
        for n in (1, 2, 3, 16):
            bounds = shard_bounds(length, n)
            assert bounds[0][0] == 0 and bounds[-1][1] == length
            assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
            sizes = [stop - start for start, stop in bounds]
            assert max(sizes) - min(sizes) <= 1


def test_throttled_store_holds_transfers_to_the_bandwidth(tmp_path: Path) -> None:
    from faasml.sync.stores.throttled import ThrottledStore

    inner = open_store(f"embedded://{tmp_path}")
    store = ThrottledStore(inner, mbps=10.0)
    start = time.perf_counter()
    store.put("k", bytes(500_000))  # 0.05 s at 10 MB/s
    assert store.get("k") == bytes(500_000)
    assert time.perf_counter() - start >= 0.099
    assert store.stats is inner.stats and inner.stats.bytes_read == 500_000
    with pytest.raises(ConfigError, match="mbps is 0"):
        ThrottledStore(inner, 0)
