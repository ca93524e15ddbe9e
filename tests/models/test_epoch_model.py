"""Properties of the per-epoch time and cost model (CE-scaling eqs. 2–5)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.catalog import load_catalog
from faasml.models import Exclusions, allocation_space, evaluate
from faasml.models.perf import epoch_time
from faasml.models.sync import sync_requests, sync_time, transfers
from faasml.workload import builtin_workloads, load_workload

AWS = load_catalog("aws-lambda")
WORKLOADS = {name: load_workload(name) for name in builtin_workloads()}
OPTIONS = [(s, scheme) for s, svc in AWS.storages.items() for scheme in svc.schemes]

workload_names = st.sampled_from(sorted(WORKLOADS))
options = st.sampled_from(OPTIONS)
counts = st.integers(min_value=1, max_value=1000)
memories = st.integers(min_value=128, max_value=10240)


@settings(max_examples=200, deadline=None)
@given(workload_names, options, counts, memories)
def test_time_positive_and_cost_non_negative(
    name: str, option: tuple[str, str], n: int, m: int
) -> None:
    table = evaluate(WORKLOADS[name], AWS, [n], [m], *option)
    if len(table):
        assert table.time_s[0] > 0 and math.isfinite(table.time_s[0])
        assert table.cost_usd[0] >= 0
        assert table.storage_usd[0] >= 0 and table.function_usd[0] > 0
        parts = table.load_s + table.compute_s + table.sync_s + table.invoke_s
        assert parts[0] == pytest.approx(table.time_s[0])


@settings(max_examples=100, deadline=None)
@given(workload_names, options, st.integers(min_value=1, max_value=300))
def test_more_memory_never_computes_slower(name: str, option: tuple[str, str], n: int) -> None:
    memory = np.arange(128, 10241, 64)
    table = evaluate(WORKLOADS[name], AWS, np.full(memory.shape, n), memory, *option)
    if len(table) > 1:
        assert np.all(np.diff(table.compute_s) <= 1e-9)
        assert np.all(np.diff(table.load_s) <= 1e-9)  # bandwidth grows with memory


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["allreduce", "scatter-reduce", "param-server"]),
    st.floats(min_value=1e-4, max_value=500),
    st.floats(min_value=1, max_value=1000),
    st.floats(min_value=0, max_value=0.1),
)
def test_sync_time_grows_with_workers_and_vanishes_for_one(
    scheme: str, model_mb: float, bandwidth: float, latency: float
) -> None:
    n = np.arange(1, 200)
    t = sync_time(scheme, n, model_mb, bandwidth, latency)
    assert t[0] == 0.0
    if scheme != "scatter-reduce":  # shards shrink as n grows; latency terms still grow
        assert np.all(np.diff(t) >= 0)
    requests = sync_requests(scheme, n, model_mb)
    assert requests.puts[0] == 0 and requests.gets[0] == 0
    assert np.all(np.diff(requests.puts) >= 0) and np.all(np.diff(requests.gets) >= 0)


def test_transfer_counts_match_the_paper() -> None:
    n = np.array([1, 2, 10])
    assert list(transfers("allreduce", n)) == [0, 4, 28]  # 3n − 2
    assert list(transfers("param-server", n)) == [0, 2, 18]  # 2n − 2
    with pytest.raises(ValueError, match="gossip"):
        transfers("gossip", n)


def test_parameter_server_and_scatter_reduce_beat_allreduce_at_equal_bandwidth() -> None:
    n = np.arange(2, 100)
    allreduce = sync_time("allreduce", n, 12.0, 80.0, 0.01)
    assert np.all(sync_time("param-server", n, 12.0, 80.0, 0.01) < allreduce)
    assert np.all(sync_time("scatter-reduce", n, 12.0, 80.0, 0.01) < allreduce)
    # A shared node caps scatter-reduce by the bytes every worker moves through it.
    capped = sync_time("scatter-reduce", n, 12.0, 80.0, 0.01, aggregate_mbps=100.0)
    assert np.all(capped >= (3 * n - 2) * 12.0 / 100.0 - 1e-9)


def test_hand_computed_epoch_lr_higgs_s3_allreduce() -> None:
    w = WORKLOADS["lr-higgs"]
    table = evaluate(w, AWS, [10], [1769], "s3", "allreduce")
    bandwidth = min(75.0, 90.0)  # function at 1769 MB vs one S3 connection
    load = (1276 / 10) / bandwidth + 0.030
    compute = (1276 / 10) * 0.002  # one vCPU: u(m) = u1
    k = math.ceil(11_000_000 / (10 * 10_000))
    sync = k * (3 * 10 - 2) * (w.model_mb / bandwidth + 0.030)
    invoke = 0.02
    assert table.load_s[0] == pytest.approx(load)
    assert table.compute_s[0] == pytest.approx(compute)
    assert table.sync_s[0] == pytest.approx(sync)
    t = load + compute + sync + invoke
    assert table.time_s[0] == pytest.approx(t)
    gb_s = 10 * t * (1769 / 1024) * 0.0000166667
    requests = k * (10 * 0.000005 + 2 * 9 * 0.0000004) + 10 * 0.0000004
    assert table.function_usd[0] == pytest.approx(gb_s)
    assert table.invocation_usd[0] == pytest.approx(10 * 0.0000002)
    assert table.storage_usd[0] == pytest.approx(requests)


def test_time_priced_storage_bills_the_node_for_the_epoch() -> None:
    w = WORKLOADS["mobilenet-cifar10"]
    table = evaluate(w, AWS, [20], [2048], "vm-ps", "param-server")
    data_gets = 20 * 0.0000004
    expected = table.time_s[0] / 3600 * AWS.storage("vm-ps").hourly_usd + data_gets
    assert table.storage_usd[0] == pytest.approx(expected)


def test_epochs_longer_than_the_duration_limit_renew_functions() -> None:
    w = WORKLOADS["resnet50-cifar10"]
    table = evaluate(w, AWS, [2], [1769], "s3", "scatter-reduce")
    assert table.time_s[0] > 900
    load_once = (w.dataset_mb / 2) / 75.0 + 0.030
    renewals = round(table.load_s[0] / load_once)
    work = load_once + table.compute_s[0] + table.sync_s[0]
    assert renewals == math.ceil(work / 900) > 1
    assert table.load_s[0] == pytest.approx(renewals * load_once)  # each renewal reloads
    assert table.invoke_s[0] == pytest.approx(renewals * 0.02)
    assert table.invocation_usd[0] == pytest.approx(2 * renewals * 0.0000002)


def test_storage_that_cannot_hold_the_model_is_excluded_with_the_reason() -> None:
    exclusions = Exclusions()
    space = allocation_space(
        WORKLOADS["mobilenet-cifar10"], AWS, memory_step_mb=512, exclusions=exclusions
    )
    assert "dynamodb/allreduce" in exclusions.storages
    assert "400 KB item limit" in exclusions.storages["dynamodb/allreduce"]
    dyn = space.options.index(("dynamodb", "scatter-reduce"))
    shard_kb = 12 * 1024 / space.n[space.option == dyn]
    assert shard_kb.size and np.all(shard_kb <= 400)  # shards of M/n fit with enough workers
    assert not np.any(space.option == space.options.index(("dynamodb", "allreduce")))


def test_space_respects_concurrency_memory_and_batches() -> None:
    small = load_catalog("aws-lambda")
    w = WORKLOADS["lr-higgs"]
    space = allocation_space(w, small, memory_step_mb=256)
    assert space.n.max() <= small.platform.concurrency_limit
    assert np.all(w.memory_needed_mb(space.n) <= space.memory_mb)
    assert space.n.max() <= w.max_functions
    local = load_catalog("local")
    local_space = allocation_space(w, local, memory_step_mb=256)
    assert len(local_space)
    vcpus = local.platform.vcpus(local_space.memory_mb) * local_space.n
    assert np.all(vcpus <= (local.platform.capacity_vcpus or 0) + 1e-9)


def test_one_function_needs_no_sync_node_and_appears_once_in_the_space() -> None:
    w = WORKLOADS["mobilenet-cifar10"]
    single = evaluate(w, AWS, [1], [4096], "redis", "allreduce")
    s3 = evaluate(w, AWS, [1], [4096], "s3", "allreduce")
    assert single.sync_s[0] == 0.0
    assert single.cost_usd[0] == pytest.approx(s3.cost_usd[0])  # no node billed
    space = allocation_space(w, AWS, memory_step_mb=1024)
    singles = space.option[space.n == 1]
    assert singles.size and np.unique(singles).size == 1


def test_worker_0_evaluates_the_whole_test_set_while_the_others_wait() -> None:
    service = AWS.storage("s3")
    plain = WORKLOADS["lr-higgs"]
    evaluating = dataclasses.replace(plain, evaluation_share=0.25)
    for n in (1, 2, 4, 16):
        base = epoch_time(plain, AWS.platform, service, service, "allreduce", n, 1769)
        with_eval = epoch_time(evaluating, AWS.platform, service, service, "allreduce", n, 1769)
        # Eq. 2's (D/n)·u(m), of which a quarter (the evaluation) is not divided among n.
        assert float(with_eval.compute_s) == pytest.approx(
            float(base.compute_s) * (0.75 + 0.25 * n), rel=1e-12
        )
    # One function: eq. 2 as printed.
    one = epoch_time(evaluating, AWS.platform, service, service, "allreduce", 1, 1769)
    alone = epoch_time(plain, AWS.platform, service, service, "allreduce", 1, 1769)
    assert float(one.compute_s) == float(alone.compute_s)
