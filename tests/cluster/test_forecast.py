"""Forecasts of inference load (``faasml.cluster.forecast``) and honest SLO accounting."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from faasml.cli.main import main
from faasml.cluster import (
    AppModel,
    Cluster,
    SimConfig,
    load_workload,
    make_policy,
    resolve_workload,
    simulate,
)
from faasml.cluster.forecast import (
    FORECASTS,
    check_forecast,
    observed_peaks,
    predict,
    provision_rate,
    seasonal_peak,
)
from faasml.cluster.inference import InferenceService, RateTrace
from faasml.exceptions import ConfigError

ROUND = 60.0


def step(low: float, high: float, at: float) -> RateTrace:
    """``low`` requests/s from 0, ``high`` from ``at`` on."""
    return RateTrace(np.array([0.0, at]), np.array([low, high]))


def test_last_misses_a_step_up_for_one_round_and_exact_does_not() -> None:
    trace = step(10.0, 50.0, 600.0)
    exact = [provision_rate(trace, t, ROUND, "exact") for t in (540.0, 600.0, 660.0)]
    last = [provision_rate(trace, t, ROUND, "last") for t in (540.0, 600.0, 660.0)]
    assert exact == [10.0, 50.0, 50.0]
    assert last == [10.0, 10.0, 50.0]  # the round from 600 s is sized for the old load


def test_max_holds_the_peak_through_a_dip_for_its_window() -> None:
    # 50 requests/s for one round, then back to 10.
    trace = RateTrace(np.array([0.0, 600.0, 660.0]), np.array([10.0, 50.0, 10.0]))
    rounds = [660.0 + k * ROUND for k in range(5)]
    held = [provision_rate(trace, t, ROUND, "max", window=3) for t in rounds]
    assert held == [50.0, 50.0, 50.0, 10.0, 10.0]
    assert [provision_rate(trace, t, ROUND, "last") for t in rounds] == [50.0] + [10.0] * 4


def test_a_peak_inside_a_round_is_observed_and_headroom_multiplies() -> None:
    # A 10 s burst inside the round [120, 180): the observed peak counts it.
    trace = RateTrace(np.array([0.0, 130.0, 140.0]), np.array([5.0, 40.0, 5.0]))
    assert observed_peaks(trace, 180.0, ROUND, 2) == [5.0, 40.0]
    assert provision_rate(trace, 180.0, ROUND, "last", headroom=1.5) == pytest.approx(60.0)
    assert provision_rate(trace, 60.0, ROUND, "exact", headroom=1.25) == pytest.approx(6.25)


def test_the_history_is_what_was_observed_before_now_only() -> None:
    trace = step(10.0, 50.0, 600.0)
    # Rounds before time 0 are not observed: at time 0 nothing is known.
    assert observed_peaks(trace, 0.0, ROUND, 5) == []
    assert observed_peaks(trace, 120.0, ROUND, 5) == [10.0, 10.0]
    assert provision_rate(trace, 0.0, ROUND, "max") == 0.0
    assert predict("max", [1.0, 9.0, 2.0, 3.0], window=2) == 3.0
    assert predict("last", []) == 0.0


DAY = 86400.0


def _days(*levels: tuple[float, float, float]) -> RateTrace:
    """A trace of ``(start, end, rate)`` pieces over a background of 10 requests/s."""
    times, rates = [0.0], [10.0]
    for start, end, rate in levels:
        times += [start, end]
        rates += [rate, 10.0]
    return RateTrace(np.array(times), np.array(rates))


def test_seasonal_foresees_the_daily_rise_that_reactive_forecasts_meet_late() -> None:
    # 50 requests/s from 08:00 to 12:00 on two days.
    eight, noon = 8 * 3600.0, 12 * 3600.0
    trace = _days((eight, noon, 50.0), (DAY + eight, DAY + noon, 50.0))
    t = DAY + eight  # the first round of the second day's rise
    assert provision_rate(trace, t, ROUND, "seasonal") == 50.0
    assert provision_rate(trace, t, ROUND, "seasonal", headroom=1.2) == pytest.approx(60.0)
    assert provision_rate(trace, t, ROUND, "last") == 10.0
    assert provision_rate(trace, t, ROUND, "max") == 10.0
    # It follows yesterday down too: the round after yesterday's fall gets the night's.
    assert provision_rate(trace, DAY + noon, ROUND, "seasonal") == 10.0
    assert provision_rate(trace, DAY + noon, ROUND, "max") == 50.0


def test_seasonal_falls_back_to_max_until_a_period_was_observed() -> None:
    trace = _days((600.0, 660.0, 50.0))
    for t in (0.0, 660.0, 720.0, 900.0, DAY - ROUND):
        assert provision_rate(trace, t, ROUND, "seasonal", window=3) == provision_rate(
            trace, t, ROUND, "max", window=3
        )
    assert provision_rate(trace, 720.0, ROUND, "seasonal", window=3) == 50.0  # max's
    assert provision_rate(trace, DAY + 720.0, ROUND, "seasonal") == 10.0  # yesterday's
    assert seasonal_peak(trace, DAY - 1.0, ROUND) is None
    assert seasonal_peak(trace, DAY + 600.0, ROUND) == 50.0
    assert seasonal_peak(trace, 7200.0, ROUND, period_s=3600.0) == 10.0  # another period


def test_a_service_that_ran_before_time_0_has_a_known_past() -> None:
    # The trace starts a day before the simulation: seasonal reads yesterday from the
    # first round, and the reactive forecasts see the rounds before 0.
    times = np.array([-DAY, -DAY + 600.0, -DAY + 660.0, -ROUND, 0.0])
    trace = RateTrace(times, np.array([5.0, 40.0, 5.0, 30.0, 5.0]))
    assert provision_rate(trace, 600.0, ROUND, "seasonal") == 40.0
    assert provision_rate(trace, 0.0, ROUND, "last") == 30.0
    assert observed_peaks(trace, 0.0, ROUND, 2) == [5.0, 30.0]
    # A trace that starts at or after 0 is observed from 0 only, as before.
    assert observed_peaks(step(10.0, 50.0, 600.0), 0.0, ROUND, 2) == []


def test_simulated_seasonal_meets_a_daily_step_that_last_misses(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    # The service ran the day before the simulation, stepping up at the same time of day.
    times = np.array([-DAY, -DAY + 600.0, 0.0, 600.0])
    svc = InferenceService(
        "s", RateTrace(times, np.array([10.0, 50.0, 10.0, 50.0])), 10.0, 100.0, max_scale=8
    )
    job = load_workload(resolve_workload("workload-1", traces_dir))[0]
    jobs = [replace(job, arrival_s=5000.0, epochs=1)]
    out = {}
    for name in ("seasonal", "last"):
        config = SimConfig(forecast=name, max_time_s=1200.0)
        result = simulate(jobs, models, Cluster.uniform(4, 4), make_policy("pollux"), config, [svc])
        out[name] = result.summary()["slo_requests"]
    assert out["seasonal"] == 1.0  # yesterday's 600 s rise foresees today's
    assert out["last"] == pytest.approx(1 - 40 * 60 / (10 * 600 + 50 * 600))


def test_seasonal_misses_a_burst_today_and_provisions_yesterdays_again() -> None:
    trace = _days((3600.0, 4200.0, 80.0), (DAY + 7200.0, DAY + 7800.0, 80.0))
    assert provision_rate(trace, DAY + 3600.0, ROUND, "seasonal") == 80.0  # yesterday's
    assert provision_rate(trace, DAY + 7200.0, ROUND, "seasonal") == 10.0  # today's: missed
    assert provision_rate(trace, DAY + 7260.0, ROUND, "seasonal") == 10.0
    assert provision_rate(trace, DAY + 7260.0, ROUND, "last") == 80.0
    # The larger of day-ahead and last: today's burst a round late, yesterday's foreseen.
    combined = [provision_rate(trace, DAY + t, ROUND, "seasonal-last") for t in (7200, 7260)]
    assert combined == [10.0, 80.0]
    assert provision_rate(trace, DAY + 3600.0, ROUND, "seasonal-last") == 80.0


@pytest.mark.parametrize(
    ("name", "window", "headroom", "message"),
    [
        (
            "ewma",
            5,
            1.0,
            "forecast is 'ewma', but must be one of: exact, last, max, seasonal, seasonal-last",
        ),
        ("max", 0, 1.0, "forecast_window is 0, but must be an integer from 1 to 1440"),
        ("last", 5, 0.5, "headroom is 0.5, but must be from 1 to 10"),
        ("last", 5, float("nan"), "headroom is nan, but must be from 1 to 10"),
    ],
)
def test_bad_forecast_settings_get_one_line_naming_value_and_rule(
    name: str, window: int, headroom: float, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        check_forecast(name, window, headroom)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        SimConfig(forecast=name, forecast_window=window, headroom=headroom)
    assert FORECASTS == ("exact", "last", "max", "seasonal", "seasonal-last")


def _run(
    traces_dir: Path,
    models: dict[str, AppModel],
    forecast: str,
    headroom: float = 1.0,
    start_s: float = 0.0,
) -> dict[str, float]:
    # One job, arriving after the end: the service alone runs every round up to 1200 s.
    job = load_workload(resolve_workload("workload-1", traces_dir))[0]
    jobs = [replace(job, arrival_s=5000.0, epochs=1)]
    # 10 requests/s until 600 s, then 50: a step up of 4 GPUs (capacity 10 per GPU).
    svc = InferenceService("s", step(10.0, 50.0, 600.0), 10.0, 100.0, min_scale=1, max_scale=8)
    config = SimConfig(
        forecast=forecast,
        headroom=headroom,
        max_time_s=1200.0,
        loaning="fapes",
        inference_start_s=start_s,
    )
    return simulate(
        jobs, models, Cluster.uniform(4, 4), make_policy("pollux"), config, [svc]
    ).summary()


def test_requests_above_the_provisioned_capacity_miss_the_slo(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    exact = _run(traces_dir, models, "exact")
    last = _run(traces_dir, models, "last")
    assert exact["slo_requests"] == 1.0 and exact["slo_time"] == 1.0
    # `last` serves the round [600, 660) on 1 GPU (10 of 50 requests/s): 40 · 60 requests
    # miss out of 10 · 600 + 50 · 600 in the 1200 s simulated.
    assert last["slo_requests"] == pytest.approx(1 - 40 * 60 / (10 * 600 + 50 * 600))
    assert last["slo_time"] == pytest.approx(1 - 60 / 1200)
    # Headroom large enough for the step meets it again, on more GPUs.
    roomy = _run(traces_dir, models, "last", headroom=5.0)
    assert roomy["slo_requests"] == 1.0
    assert roomy["inference_gpu_s"] > exact["inference_gpu_s"]


def test_added_workers_serve_only_after_their_start(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    total = 10 * 600 + 50 * 600
    # The first worker starts at 0 s (10 requests/s unserved until 10 s); exact scales
    # 1 -> 5 GPUs at 600 s, and the 4 new ones serve from 610 s.
    exact = _run(traces_dir, models, "exact", start_s=10.0)
    assert exact["slo_requests"] == pytest.approx(1 - (10 * 10 + 40 * 10) / total)
    assert exact["slo_time"] == pytest.approx(1 - 20 / 1200)
    # last: the round from 600 s on 1 GPU, then the new ones start at 660 s.
    last = _run(traces_dir, models, "last", start_s=10.0)
    assert last["slo_requests"] == pytest.approx(1 - (10 * 10 + 40 * 70) / total)
    # The starting workers hold their GPUs all the same.
    assert exact["inference_gpu_s"] == _run(traces_dir, models, "exact")["inference_gpu_s"]
    with pytest.raises(
        ConfigError, match=re.escape("inference_start_s is 61.0, but must be from 0")
    ):
        SimConfig(inference_start_s=61.0)


def test_the_cli_takes_a_forecast_and_refuses_a_bad_one(
    tmp_path: Path, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = tmp_path / "services.yaml"
    services.write_text(
        "services:\n  - name: web\n    capacity_rps: 10\n    slo_ms: 100\n    max_scale: 8\n"
        "    rate: {tidal: {peak_rps: 60, days: 1, seed: 2}}\n"
    )
    args = ["cluster", "simulate", "workload-1", "--servers", "4", "--until", "20m"]
    args += ["--traces", str(traces_dir), "--inference", str(services)]
    extra = ["--forecast", "max", "--headroom", "1.2", "--inference-start", "5s", "--json"]
    assert main([*args, *extra]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["forecast"] == "max" and data["headroom"] == 1.2
    assert data["inference_start_s"] == 5.0
    assert main([*args, "--forecast", "psychic"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        "forecast is 'psychic', but must be one of: exact, last, max, seasonal, seasonal-last"
        in err.replace("\n", " ")
    )


def test_a_reclaim_decided_late_still_preempts_with_its_overheads(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    """Training fills the pool; the load steps up 10x at 600 s. `exact` reclaims at 600 s,
    `last` a round later, after a round of misses; both preempt training jobs, which pay
    the restart overhead and lose no progress."""
    picked = load_workload(resolve_workload("workload-1", traces_dir))[:8]
    busy = [replace(j, arrival_s=0.0, epochs=50) for j in picked]
    svc = InferenceService("s", step(10.0, 100.0, 600.0), 10.0, 100.0, max_scale=12)
    out = {}
    for forecast in ("exact", "last"):
        config = SimConfig(forecast=forecast, max_time_s=1200.0, loaning="fapes", restart_s=30.0)
        result = simulate(busy, models, Cluster.uniform(4, 4), make_policy("pollux"), config, [svc])
        s = result.summary()
        assert s["reclaim_preemptions"] > 0
        assert s["reclaim_preemptions"] == sum(r.reclaim_preemptions for r in result.jobs)
        # Every preempted job paid the restart on each of its GPUs (FaPES Table 2).
        assert s["reclaim_lost_gpu_s"] >= 30.0 * s["reclaim_preemptions"]
        assert all(r.progress > 0 for r in result.jobs if r.reclaim_preemptions)
        out[forecast] = s
    assert out["exact"]["slo_requests"] == 1.0
    missed = (100.0 - 10.0) * 60.0  # the round [600, 660) served on 1 GPU
    total = 10.0 * 600.0 + 100.0 * 600.0
    assert out["last"]["slo_requests"] == pytest.approx(1 - missed / total)
