"""Predicting a real Ray run with the simulator: the fit, the translation of the run's jobs
and services to the simulator's clock, the executor and the comparison (pure, no Ray)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from faasml.cluster import AppModel, Cluster, Job, make_policy
from faasml.cluster.goodput import TopologyCommModel
from faasml.cluster.inference import InferenceService, RateTrace
from faasml.cluster.loans import reserve_servers
from faasml.cluster.ray_predict import (
    RunModel,
    calibration_placements,
    compare,
    compress_arrivals,
    compress_service,
    fit_errors,
    fit_run_model,
    predict_run,
)
from faasml.cluster.ray_run import (
    DAY_S,
    Calibration,
    JobOutcome,
    RayRunner,
    RunConfig,
    RunResult,
    StepSample,
)
from faasml.exceptions import ConfigError

TRUE = RunModel(
    compute_s=0.020,
    comm=TopologyCommModel(single=0.0, intra0=0.004, intra1=0.003, inter0=0.010, inter1=0.006),
    restart_s=2.5,
)


def _calibration(model: RunModel, cluster: Cluster, restarts: tuple[float, ...]) -> Calibration:
    steps = tuple(
        StepSample(cluster.layout(p), model.step_s(cluster.layout(p)))
        for p in calibration_placements(cluster)
    )
    return Calibration(steps, restarts)


def test_calibration_placements_walk_packed_then_spread() -> None:
    placements = calibration_placements(Cluster.uniform(3, 2))
    assert placements == [
        (0,),
        (0, 0),
        (0, 0, 1),
        (0, 0, 1, 1),
        (0, 0, 1, 1, 2),
        (0, 0, 1, 1, 2, 2),
        (0, 1),
        (0, 1, 2),
    ]
    # Each is reached from the one before by a real restart.
    assert all(a != b for a, b in itertools.pairwise(placements))
    assert calibration_placements(Cluster.uniform(1, 1)) == [(0,)]


def test_fit_recovers_a_known_model() -> None:
    # Three servers of 4 GPUs: three points on one server beyond one GPU (a slope to fit),
    # and points on 2 and 3 servers (packed and spread) for the inter-server terms.
    cluster = Cluster.uniform(3, 4)
    fitted = fit_run_model(_calibration(TRUE, cluster, (2.0, 2.5, 9.0)))
    assert fitted.compute_s == pytest.approx(TRUE.compute_s)
    assert fitted.comm.intra0 == pytest.approx(TRUE.comm.intra0)
    assert fitted.comm.intra1 == pytest.approx(TRUE.comm.intra1)
    assert fitted.comm.inter0 == pytest.approx(TRUE.comm.inter0)
    assert fitted.comm.inter1 == pytest.approx(TRUE.comm.inter1)
    assert fitted.restart_s == 2.5  # the median: one slow restart does not move it
    assert max(abs(e) for e in fit_errors(fitted, _calibration(TRUE, cluster, (1.0,)))) < 1e-9


def test_fit_keeps_slopes_non_negative_and_reports_its_error() -> None:
    # Steps that get faster with more GPUs on a server (not the model's form): the slope is
    # kept at 0 (as for the traces) and the fit error says how far off the form is.
    cluster = Cluster.uniform(1, 4)
    samples = tuple(StepSample(cluster.layout((0,) * k), 0.05 - 0.005 * k) for k in (1, 2, 3, 4))
    cal = Calibration(samples, (1.0,))
    fitted = fit_run_model(cal)
    assert fitted.comm.intra1 == 0.0
    errors = fit_errors(fitted, cal)
    assert errors[0] == pytest.approx(0.0)
    assert max(abs(e) for e in errors) > 0.1


@pytest.mark.parametrize(
    ("steps", "restarts", "match"),
    [
        ((StepSample(Cluster.uniform(1, 2).layout((0, 0)), 0.1),), (1.0,), "one GPU"),
        ((StepSample(Cluster.uniform(1, 2).layout((0,)), 0.1),), (), "restart"),
        ((StepSample(Cluster.uniform(1, 2).layout((0,)), 0.0),), (1.0,), "must be > 0"),
    ],
)
def test_fit_rejects_a_calibration_it_cannot_use(
    steps: tuple[StepSample, ...], restarts: tuple[float, ...], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        fit_run_model(Calibration(steps, restarts))


def test_arrivals_are_counted_from_the_first_and_compressed_like_the_day() -> None:
    jobs = [Job("a", "cifar10", 5000.0, 1, 128), Job("b", "cifar10", 3000.0, 1, 128)]
    out = compress_arrivals(jobs, day_s=60.0)
    assert [j.name for j in out] == ["a", "b"]
    assert out[0].arrival_s == pytest.approx(2000.0 * 60.0 / DAY_S)
    assert out[1].arrival_s == 0.0
    assert compress_arrivals([], 60.0) == []


def test_a_compressed_service_has_the_same_load_on_the_runs_clock() -> None:
    rate = RateTrace(np.array([0.0, 3600.0, 40000.0]), np.array([5.0, 80.0, 20.0]))
    service = InferenceService("web", rate, capacity_rps=20.0, slo_ms=100.0, max_scale=8)
    day_s = 60.0
    scale = DAY_S / day_s
    fast = compress_service(service, day_s)
    for t in (0.0, 2.4, 2.6, 27.0, 28.0, 59.0):
        assert fast.rate.rate_at(t) == service.rate.rate_at(t * scale)
    # The run provisions rounds of round_s wall seconds = round_s · scale trace seconds.
    assert reserve_servers([fast], 2.0, 2) == reserve_servers([service], 2.0 * scale, 2)
    assert (fast.capacity_rps, fast.slo_ms, fast.max_scale) == (20.0, 100.0, 8)


def test_predicted_jct_is_restart_plus_steps_capped_per_round(
    models: dict[str, AppModel],
) -> None:
    cluster = Cluster.uniform(2, 2)
    model = RunModel(0.1, TopologyCommModel(0.0, 0.0, 0.0, 0.0, 0.0), restart_s=0.5)
    jobs = [Job("a", "cifar10", 0.0, 1, 128)]
    # Fifo gives the job the one GPU it asked for at round 0 (t = 0). 10 steps of 0.1 s,
    # at most 2 a round of 1 s: rounds 0-3 do 2 each (after the 0.5 s restart in round 0),
    # round 4 does the last 2, done at 4.2 s.
    config = RunConfig(round_s=1.0, steps=10, steps_per_round=2, day_s=60.0)
    result = predict_run(jobs, models, cluster, make_policy("fifo", 1.0), config, [], model)
    assert result.jobs[0].jct == pytest.approx(4.2)
    # Without the cap: 0.5 s + 10 × 0.1 s.
    free = RunConfig(round_s=1.0, steps=10, day_s=60.0)
    result = predict_run(jobs, models, cluster, make_policy("fifo", 1.0), free, [], model)
    assert result.jobs[0].jct == pytest.approx(1.5)
    assert result.loans is None


def test_predicted_slo_share_counts_the_requests_beyond_max_scale(
    models: dict[str, AppModel],
) -> None:
    # 30 requests/s all day, 10 per GPU, at most 2 GPUs: a third of the requests miss.
    rate = RateTrace(np.array([0.0]), np.array([30.0]))
    service = InferenceService("web", rate, capacity_rps=10.0, slo_ms=100.0, max_scale=2)
    jobs = [Job("a", "cifar10", 0.0, 1, 128)]
    config = RunConfig(round_s=1.0, steps=20, day_s=60.0)
    result = predict_run(
        jobs, models, Cluster.uniform(2, 2), make_policy("fifo", 1.0), config, [service], TRUE
    )
    assert result.loans is not None
    assert result.loans["slo_requests"] == pytest.approx(2 / 3)
    assert result.jobs[0].jct is not None


def test_compare_sets_each_job_beside_its_measurement(models: dict[str, AppModel]) -> None:
    cluster = Cluster.uniform(2, 2)
    model = RunModel(0.1, TopologyCommModel(0.0, 0.0, 0.0, 0.0, 0.0), restart_s=0.5)
    jobs = [Job("a", "cifar10", 0.0, 1, 128), Job("b", "cifar10", 0.0, 1, 128)]
    config = RunConfig(round_s=1.0, steps=10, day_s=60.0)
    predicted = predict_run(jobs, models, cluster, make_policy("fifo", 1.0), config, [], model)
    assert [r.jct for r in predicted.jobs] == [pytest.approx(1.5)] * 2
    measured = RunResult(
        "fifo",
        [
            JobOutcome("a", 0.0, 0.0, 3.0, 10, restarts=1, running_s=2.5),
            JobOutcome("b", 0.0, 0.0, None, 4),  # did not finish
        ],
        requests=10,
        requests_ok=8,
        latencies_ms=[1.0] * 10,
        servers_loaned=0,
        servers_reclaimed=0,
        wall_s=5.0,
        rounds_s=[0.0, 2.0, 4.5],
    )
    cmp = compare(measured, predicted)
    a, b = cmp.jobs
    assert (a.name, a.predicted_s, a.measured_s) == ("a", pytest.approx(1.5), 3.0)
    assert a.error == pytest.approx(-0.5)
    # Both held a GPU from round 0 to their completion (restart included).
    assert (a.predicted_running_s, a.measured_running_s) == (pytest.approx(1.5), 2.5)
    assert b.measured_s is None and b.error is None
    assert cmp.avg_jct.predicted_s == pytest.approx(1.5) and cmp.avg_jct.measured_s == 3.0
    assert (cmp.restarts_predicted, cmp.restarts_measured) == (0, 1)
    # Simulated rounds at 0, 1 and 2 s (the last finds both done at 1.5 s); the run's
    # rounds came late.
    assert (cmp.rounds_predicted, cmp.rounds_measured) == (3, 3)
    assert cmp.mean_round_measured_s == pytest.approx(2.25)
    assert cmp.slo_predicted is None and cmp.slo_error is None  # no services predicted
    assert cmp.avg_jct.error == pytest.approx(-0.5)


class _NoRay:
    """Stands for the ``ray`` module where nothing reaches Ray (a refused calibration)."""

    def remote(self, **_: object) -> object:
        return lambda cls: cls


@pytest.mark.parametrize(
    ("placement", "match"),
    [((0, 2), "must name servers 0 to 1"), ((), "must name servers"), ((1, 1, 1), "server 1")],
)
def test_a_calibration_placement_off_the_cluster_is_refused_before_ray(
    tmp_path: Path, placement: tuple[int, ...], match: str
) -> None:
    runner = RayRunner(
        _NoRay(), [], {}, Cluster.uniform(2, 2), make_policy("fifo", 2.0), RunConfig(), [], tmp_path
    )
    with pytest.raises(ConfigError, match=match):
        runner.calibrate([(0,), placement])


def test_cluster_run_predict_prints_the_comparison_in_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's printing and JSON, with the Ray run itself stood in for (its own
    end-to-end test runs it): the calibration it asks for, the prediction beside it."""
    import faasml.cluster.ray_run as ray_run
    from faasml.cli.main import main

    asked: list[list[tuple[int, ...]]] = []

    def fake_run(
        jobs: list[Job],
        models: object,
        cluster: Cluster,
        policy: object,
        config: RunConfig,
        services: object,
        calibrate: list[tuple[int, ...]],
    ) -> RunResult:
        asked.append(list(calibrate))
        outcomes = [JobOutcome(j.name, j.arrival_s, j.arrival_s, j.arrival_s + 9, 50) for j in jobs]
        cal = _calibration(TRUE, cluster, (1.0, 2.0))
        return RunResult("fifo", outcomes, 0, 0, [], 0, 0, 20.0, calibration=cal)

    monkeypatch.setattr(ray_run, "run_on_ray", fake_run)
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "name,time,application,num_replicas,batch_size\na,0,cifar10,1,128\nb,1440,ncf,1,32768\n"
    )
    args = ["cluster", "run", str(trace), "--policy", "fifo", "--steps", "50", "--predict"]
    assert main(args) == 0
    assert asked == [calibration_placements(Cluster.uniform(2, 2))]  # the default cluster
    out = capsys.readouterr().out
    assert "predicted (simulator) vs measured" in out and "restart: 1.50 s" in out
    rows = [line for line in out.splitlines() if line.lstrip("│| ").startswith(("a ", "b "))]
    assert len(rows) == 4  # each job in the run's table and in the comparison
    assert max(len(line) for line in out.splitlines()) <= 80
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jobs = data["prediction"]["jobs"]
    assert [j["name"] for j in jobs] == ["a", "b"] and all(j["measured_s"] == 9.0 for j in jobs)
    assert data["model"]["restart_s"] == 1.5 and len(data["calibration"]["steps"]) == 5
