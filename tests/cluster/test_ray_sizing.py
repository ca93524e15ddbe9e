"""How the real Ray run sizes its services: the forecast (as ``cluster simulate``'s), the
rounds it really had, slots that take time to start, and the command's options (pure, no
Ray: the run itself is in ``test_ray_run.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from faasml.cli.main import main
from faasml.cluster import AppModel, Cluster, Job, make_policy
from faasml.cluster.forecast import provision_rate
from faasml.cluster.goodput import TopologyCommModel
from faasml.cluster.inference import InferenceService, RateTrace, tidal_trace
from faasml.cluster.ray_predict import RunModel, predict_run
from faasml.cluster.ray_run import DAY_S, InferenceSizer, JobOutcome, RunConfig, RunResult, route

DAY = 60.0
SCALE = DAY_S / DAY


def _service(rate: RateTrace) -> InferenceService:
    return InferenceService("web", rate, capacity_rps=10.0, slo_ms=100.0, max_scale=8)


def _step(at_wall: float, high: float = 50.0) -> RateTrace:
    """10 requests/s, ``high`` from ``at_wall`` seconds of the run (a trace in day time)."""
    return RateTrace(np.array([0.0, at_wall * SCALE]), np.array([10.0, high]))


def _sizes(config: RunConfig, rounds: list[float], rate: RateTrace) -> list[float]:
    sizer = InferenceSizer([_service(rate)], config, SCALE)
    return [sizer.rates(t)[0] for t in rounds]


def test_the_run_sizes_from_its_forecast_not_the_true_load() -> None:
    rounds = [0.0, 2.0, 4.0, 6.0, 8.0]
    # The load steps up at 4 s: the exact bound sizes the round from 4 s for it, a
    # reactive forecast one round later; headroom multiplies.
    assert _sizes(RunConfig(round_s=2.0), rounds, _step(4.0)) == [10, 10, 50, 50, 50]
    last = RunConfig(round_s=2.0, forecast="last", headroom=1.5)
    assert _sizes(last, rounds, _step(4.0)) == [0, 15, 15, 75, 75]  # no history: min_scale
    # After a one-round spike, max holds it for its window of rounds, last drops at once.
    spike = RateTrace(np.array([0.0, 2 * SCALE, 4 * SCALE]), np.array([10.0, 50.0, 10.0]))
    held = RunConfig(round_s=2.0, forecast="max", forecast_window=2)
    assert _sizes(held, [*rounds, 10.0], spike) == [0, 10, 50, 50, 10, 10]
    assert _sizes(RunConfig(round_s=2.0, forecast="last"), rounds, spike) == [0, 10, 50, 10, 10]


def test_a_late_round_observes_the_time_it_really_covered() -> None:
    # The driver was busy: the round after 2 s starts at 5 s. A spike from 2.2 to 2.8 s
    # fell in the round the run really had (2-5 s): a reactive forecast sizes for it. The
    # nominal last round (3-5 s, the simulator's) would not have seen it.
    spike = RateTrace(np.array([0.0, 2.2 * SCALE, 2.8 * SCALE]), np.array([10.0, 50.0, 10.0]))
    config = RunConfig(round_s=2.0, forecast="last")
    assert _sizes(config, [0.0, 2.0, 5.0], spike) == [0, 10, 50]
    assert provision_rate(spike, 5.0 * SCALE, 2.0 * SCALE, "last") == 10


@pytest.mark.parametrize(
    ("forecast", "headroom"),
    [("exact", 1.0), ("last", 1.1), ("max", 1.2), ("seasonal", 1.1), ("seasonal-last", 1.0)],
)
def test_rounds_on_time_size_as_the_simulator_does(forecast: str, headroom: float) -> None:
    """With rounds exactly ``round_s`` apart, the run provisions what the simulator's
    ``provision_rate`` does on the run's clock (so ``--predict`` sizes alike): over two
    compressed days, so ``seasonal`` falls back to ``max`` on the first and reads the
    first on the second."""
    rate = tidal_trace(600.0, days=2, seed=3)
    config = RunConfig(round_s=2.0, forecast=forecast, headroom=headroom)
    rounds = [2.0 * k for k in range(60)]
    expected = [provision_rate(rate, t * SCALE, 2.0 * SCALE, forecast, 5, headroom) for t in rounds]
    got = _sizes(config, rounds, rate)
    assert got == pytest.approx(expected, rel=1e-12)
    assert len(set(got)) > 5  # the tide moves: the comparison is not of constants


def test_requests_go_round_robin_to_serving_slots_and_wait_for_starting_ones() -> None:
    slots = [(0, "a", 0.0), (0, "b", 3.0), (1, "c", 1.0)]
    assert [route(slots, 2.0, n)[0] for n in range(4)] == ["a", "c", "a", "c"]
    assert [route(slots, 3.0, n)[0] for n in range(3)] == ["a", "b", "c"]
    # Every slot still starting: hold the request until the first serves.
    assert route([(0, "b", 3.0), (1, "c", 2.5)], 1.0, 0) == (None, 2.5)
    assert route([], 1.0, 0) == (None, None)  # nothing serves it: a miss


def test_predicted_run_uses_the_runs_forecast(models: dict[str, AppModel]) -> None:
    """``--predict`` simulates the run with its forecast: a reactive one misses the first
    round of a step up (one GPU's load to two), the exact bound does not."""
    model = RunModel(0.01, TopologyCommModel(0.0, 0.0, 0.0, 0.0, 0.0), restart_s=0.1)
    jobs = [Job("a", "cifar10", 0.0, 1, 128)]
    shares = {}
    for forecast in ("exact", "last"):
        config = RunConfig(round_s=1.0, steps=400, steps_per_round=40, forecast=forecast)
        result = predict_run(
            jobs, models, Cluster.uniform(2, 2), make_policy("fifo", 1.0), config,
            [_service(_step(4.0, 20.0))], model,
        )  # fmt: skip
        assert result.loans is not None
        shares[forecast] = result.loans["slo_requests"]
    assert shares["exact"] == pytest.approx(1.0)
    assert shares["last"] < 0.99


def test_cluster_run_takes_the_forecast_options_and_reports_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import faasml.cluster.ray_run as ray_run

    got: list[RunConfig] = []

    def fake_run(
        jobs: list[Job], models: object, cluster: Cluster, policy: object, config: RunConfig,
        services: object, calibrate: object,
    ) -> RunResult:  # fmt: skip
        got.append(config)
        outcomes = [JobOutcome(j.name, j.arrival_s, j.arrival_s, j.arrival_s + 9, 50) for j in jobs]
        return RunResult(
            "fifo", outcomes, 10, 9, [5.0] * 9, 1, 1, 20.0, forecast=config.forecast,
            forecast_window=config.forecast_window, headroom=config.headroom,
            inference_start_s=config.inference_start_s,
        )  # fmt: skip

    monkeypatch.setattr(ray_run, "run_on_ray", fake_run)
    trace = tmp_path / "jobs.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,1,128\n")
    services = tmp_path / "services.yaml"
    services.write_text(
        "services:\n  - name: web\n    capacity_rps: 10\n    slo_ms: 1000\n    max_scale: 4\n"
        "    rate: {tidal: {peak_rps: 60, days: 1, seed: 2}}\n"
    )
    args = ["cluster", "run", str(trace), "--policy", "fifo", "--inference", str(services)]
    args += ["--forecast", "max", "--headroom", "1.2", "--inference-start", "0.5"]
    assert main(args) == 0
    config = got[-1]
    assert (config.forecast, config.headroom, config.inference_start_s) == ("max", 1.2, 0.5)
    out = capsys.readouterr().out
    assert "sized by forecast max × 1.2 (start 0.5 s)" in out and "within SLO 90.0%" in out
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["inference"]
    assert data["forecast"] == "max" and data["headroom"] == 1.2
    assert data["inference_start_s"] == 0.5 and data["slo_requests"] == 0.9
    assert main(args[:7]) == 0  # no forecast options: the exact bound, as before
    assert got[-1].forecast == "exact" and got[-1].headroom == 1.0
