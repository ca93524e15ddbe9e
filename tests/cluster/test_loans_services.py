"""Inference services: rate traces (tidal generator, CSV loader), the services file, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from faasml.cluster.inference import (
    InferenceService,
    RateTrace,
    ServiceError,
    ServiceTally,
    load_rate_csv,
    load_services,
    tidal_trace,
)
from faasml.exceptions import ConfigError


def test_tidal_trace_is_seeded_and_follows_the_daily_tide() -> None:
    a = tidal_trace(1000.0, days=4, seed=3)
    b = tidal_trace(1000.0, days=4, seed=3)
    c = tidal_trace(1000.0, days=4, seed=4)
    assert np.array_equal(a.rates, b.rates) and not np.array_equal(a.rates, c.rates)
    hours = (a.times_s % 86400.0) / 3600.0
    day = np.median(a.rates[(hours >= 12) & (hours < 16)])
    night = np.median(a.rates[(hours >= 0) & (hours < 4)])
    assert 0.15 < night / day < 0.45  # Fig. 1: nights at about a quarter of the peak
    quiet = tidal_trace(1000.0, days=4, seed=3, bursts_per_day=0, noise=0)
    assert quiet.peak == pytest.approx(1000.0, rel=1e-3)
    assert a.peak > quiet.peak  # bursts go above the tide


def test_rate_trace_pieces_and_tally_count_requests_within_the_slo() -> None:
    trace = RateTrace(np.array([10.0, 20.0]), np.array([5.0, 15.0]))
    assert trace.rate_at(0.0) == 0.0 and trace.rate_at(15.0) == 5.0 and trace.rate_at(99) == 15
    durations, rates = trace.pieces(0.0, 30.0)
    assert list(durations) == [10.0, 10.0, 10.0] and list(rates) == [0.0, 5.0, 15.0]
    assert trace.peak_between(0.0, 20.0) == 5.0
    service = InferenceService("s", trace, capacity_rps=10.0, slo_ms=100.0)
    tally = ServiceTally()
    tally.add(service, 1, 0.0, 30.0)  # 10 requests/s within the SLO on one GPU
    assert tally.time_share == pytest.approx(2 / 3)
    assert tally.request_share == pytest.approx((50 + 100) / (50 + 150))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_services_file_with_a_tidal_and_a_csv_service(tmp_path: Path) -> None:
    write(tmp_path / "rates.csv", "time_s,requests_per_s\n0,10\n3600,40\n")
    path = write(
        tmp_path / "services.yaml",
        "services:\n"
        "  - name: search\n    capacity_rps: 20\n    slo_ms: 100\n    latency_ms: 30\n"
        "    min_scale: 2\n    max_scale: 64\n"
        "    rate: {tidal: {peak_rps: 500, days: 2, seed: 1}}\n"
        "  - name: ads\n    capacity_rps: 10\n    slo_ms: 50\n    max_scale: 8\n"
        "    rate: {csv: rates.csv}\n",
    )
    search, ads = load_services(path)
    assert search.name == "search" and search.min_scale == 2 and search.max_scale == 64
    assert ads.rate.peak == 40.0 and ads.workers_for(40.0) == 4
    assert search.workers_for(0.0) == 2 and search.workers_for(1e9) == 64


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("min_scale: 20\n", "min_scale is 20, but must be <= max_scale"),
        ("latency_ms: 300\n", "slo_ms is 100, but no GPU can meet it"),
        ("capacity_rps: -1\n", r"capacity_rps is -1(\.0)?, but must be > 0"),
        ("colour: red\n", "unknown field"),
    ],
)
def test_bad_services_name_the_value_and_the_rule(tmp_path: Path, body: str, message: str) -> None:
    text = (
        "services:\n  - name: s\n    slo_ms: 100\n    rate: {tidal: {peak_rps: 10, days: 1}}\n"
        "    max_scale: 16\n    " + body
    )
    if "capacity_rps" not in body:
        text += "    capacity_rps: 5\n"
    with pytest.raises(ServiceError, match=message):
        load_services(write(tmp_path / "s.yaml", text))


@pytest.mark.parametrize(
    ("csv", "message"),
    [
        ("time_s,requests_per_s\n0,10\n60,-3\n", r":3: the value of requests_per_s is -3"),
        ("time_s,requests_per_s\n0,10\n0,5\n", r":3: the value of time_s is 0, but times must"),
        ("time,rate\n0,1\n", "must be the columns time_s,requests_per_s"),
        ("time_s,requests_per_s\n0,lots\n", "requests_per_s is 'lots', but must be a number"),
        ("time_s,requests_per_s\n", "no rows"),
    ],
)
def test_bad_rate_csv_names_the_line_and_the_rule(tmp_path: Path, csv: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_rate_csv(write(tmp_path / "r.csv", csv))


def test_a_negative_peak_and_a_missing_csv_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match="peak_rps is -5"):
        tidal_trace(-5.0)
    path = write(
        tmp_path / "s.yaml",
        "services:\n  - {name: s, capacity_rps: 1, slo_ms: 9, max_scale: 1,\n"
        "     rate: {csv: none.csv}}\n",
    )
    with pytest.raises(ConfigError, match="cannot read rate trace"):
        load_services(path)


def test_every_shipped_services_file_loads() -> None:
    files = sorted((Path(__file__).parents[2] / "examples" / "services").glob("*.yaml"))
    assert files
    for path in files:
        services = load_services(path)
        assert services and all(s.min_scale <= s.max_scale for s in services)
