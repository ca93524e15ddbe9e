"""The probe's synchronised round, its pure parts: the transfer and straggler wait read from
two functions' reduce times, and eq. 3's latency fitted so that the planners' t^p at n = 2 is
the measured round (the real probe is exercised in ``test_job_profile.py``)."""

from __future__ import annotations

import dataclasses

import pytest

from faasml.catalog import load_catalog
from faasml.models.perf import epoch_time, network_mbps
from faasml.models.sync import sync_time
from faasml.runtime.profile.record import JobProfile
from faasml.runtime.profile.sync_round import (
    MAX_ROUNDS,
    MIN_ROUNDS,
    SYNC_N,
    priced_storages,
    round_figures,
    timed_rounds,
)
from faasml.workload import load_workload


def test_transfer_is_the_last_arrivals_reduce_and_the_wait_the_mean_above_it() -> None:
    results = [
        {
            "sync_s": {"allreduce": [0.010, 0.002, 0.004], "scatter-reduce": [0.003]},
            "compute_s": {"allreduce": [0.010, 0.020, 0.010], "scatter-reduce": [0.004]},
        },
        {
            "sync_s": {"allreduce": [0.002, 0.008, 0.004], "scatter-reduce": [0.005]},
            "compute_s": {"allreduce": [0.010, 0.010, 0.030], "scatter-reduce": [0.004]},
        },
    ]
    rounds, share = round_figures(results)
    figures = {s: (t, w) for s, t, w in rounds}
    transfer, wait = figures["allreduce"]
    # Means over the rounds (an epoch sums its rounds, long tail included).
    assert transfer == pytest.approx(0.008 / 3)  # rounds' least: 0.002, 0.002, 0.004
    assert wait == pytest.approx(0.007 / 3)  # rounds' mean less least: 0.004, 0.003, 0.0
    assert figures["scatter-reduce"] == pytest.approx((0.003, 0.001))
    # waits over the rounds' mean computation (0.010, 0.015, 0.020 and 0.004)
    assert share == pytest.approx((0.007 / 3 / 0.015 + 0.25) / 2)


def test_timed_rounds_cover_the_measurement_within_bounds() -> None:
    assert timed_rounds(1e-5) == MAX_ROUNDS
    assert timed_rounds(10.0) == MIN_ROUNDS
    assert MIN_ROUNDS < timed_rounds(0.01) < MAX_ROUNDS


@pytest.mark.parametrize("delivered", [None, 0.9])
@pytest.mark.parametrize("scheme", ["allreduce", "scatter-reduce"])
def test_fitted_latency_prices_the_measured_round_at_two_functions(
    delivered: float | None, scheme: str
) -> None:
    catalog = load_catalog("local")
    platform = dataclasses.replace(catalog.platform, delivered_vcpus=delivered)
    memory, model_mb = 1728, 0.04
    rounds = [(scheme, 0.004, 0.003)]
    storages = priced_storages(catalog.storages, platform, "embedded", memory, rounds, model_mb)
    service = storages["embedded"]
    assert catalog.storages["embedded"].scheme_latency_s == {}  # the catalog is not changed
    assert set(service.scheme_latency_s) == {scheme}
    kappa = platform.contention(SYNC_N * float(platform.vcpus(memory)))
    assert (kappa > 1) == (delivered is not None)  # two one-vCPU functions on 0.9 delivered
    priced = sync_time(
        scheme,
        SYNC_N,
        model_mb,
        network_mbps(platform, service, memory),
        service.latency_for(scheme),
        service.aggregate_mbps,
    )
    assert float(priced) == pytest.approx(0.004 / kappa, rel=1e-9)  # the transfer
    assert storages["redis"] == catalog.storages["redis"]


def test_the_straggler_wait_is_a_share_of_the_computation_of_several_functions() -> None:
    catalog = load_catalog("local")
    service = catalog.storage("embedded")
    base = dataclasses.replace(load_workload("lr-higgs"), dataset_mb=10.0, samples=10_000)
    waiting = dataclasses.replace(base, straggler_share=0.25)
    for n, memory in ((1, 1024), (2, 1024), (3, 512)):
        plain = epoch_time(base, catalog.platform, service, service, "allreduce", n, memory)
        slow = epoch_time(waiting, catalog.platform, service, service, "allreduce", n, memory)
        assert float(slow.compute_s) == float(plain.compute_s)
        extra = 0.0 if n == 1 else 0.25 * float(plain.compute_s)  # one function waits for none
        assert float(slow.sync_s) == pytest.approx(float(plain.sync_s) + extra, rel=1e-12)
    # It grows as a smaller CPU share slows the computation.
    half = epoch_time(waiting, catalog.platform, service, service, "allreduce", 2, 896)
    full = epoch_time(waiting, catalog.platform, service, service, "allreduce", 2, 1792)
    assert float(half.sync_s - full.sync_s) > 0


def test_nothing_measured_or_a_scheme_the_store_lacks_leaves_the_catalog() -> None:
    catalog = load_catalog("local")
    platform = catalog.platform
    same = priced_storages(catalog.storages, platform, "", 0, (), 0.1)
    assert same == dict(catalog.storages)
    lacking = priced_storages(
        catalog.storages, platform, "embedded", 1728, [("param-server", 0.01, 0.0)], 0.1
    )
    assert lacking["embedded"].scheme_latency_s == {}


def _profile(**extra: object) -> dict[str, object]:
    data: dict[str, object] = {
        "key": "k",
        "params": 29,
        "model_mb": 1e-4,
        "bytes_per_sample": 232.0,
        "footprint_mb": 80.0,
        "compute_points": [[1728, 1e-6]],
        "eval_points": [[1728, 1e-7]],
        "checkpoint_s": 0.01,
        "cold_start_s": 1.0,
        "dispatch_s": 0.002,
        "train_samples": 1600,
        "test_samples": 400,
        "configs": 1,
        "profiling_usd": 1e-5,
        "profiling_s": 5.0,
    }
    data.update(extra)
    return data


def test_the_round_is_kept_in_the_profile_and_checked_when_read_back() -> None:
    old = JobProfile.from_dict(_profile())  # a profile from before the round was measured
    assert old.sync_rounds == () and old.sync_storage == "" and old.sync_memory_mb == 0
    new = JobProfile.from_dict(
        _profile(
            sync_storage="embedded",
            sync_memory_mb=1728,
            sync_rounds=[["allreduce", 0.004, 0.003]],
            straggler_share=0.3,
        )
    )
    assert new.sync_rounds == (("allreduce", 0.004, 0.003),) and new.straggler_share == 0.3
    assert JobProfile.from_dict(new.to_dict()) == new
    assert "allreduce round of 2 via embedded 4 ms + 3 ms waiting" in new.summary()
    for bad in ([["allreduce", -1.0, 0.0]], [["allreduce", 0.1]], "allreduce", [[1, 0.1, 0.1]]):
        with pytest.raises(ValueError, match="sync_rounds"):
            JobProfile.from_dict(_profile(sync_rounds=bad))
    with pytest.raises(ValueError, match="sync_memory_mb"):
        JobProfile.from_dict(_profile(sync_memory_mb=17.5))
