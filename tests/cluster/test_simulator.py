from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from faasml.cluster import (
    AppModel,
    Cluster,
    Job,
    SimConfig,
    load_workload,
    make_policy,
    resolve_workload,
    simulate,
)
from faasml.cluster.metrics import SimResult, json_safe
from faasml.cluster.policies import GPU_POOL, POLICIES
from faasml.exceptions import ConfigError

GOLDEN = Path(__file__).parent / "golden" / "workload1_slice.json"
KEYS = (
    "avg_jct_s",
    "p95_jct_s",
    "max_jct_s",
    "avg_queue_s",
    "avg_goodput",
    "avg_speedup",
    "avg_utilization",
)


def slice_jobs(traces_dir: Path, count: int = 20, epochs: int = 3) -> list[Job]:
    """The first ``count`` jobs of Pollux workload 1, each cut to ``epochs`` epochs."""
    jobs = load_workload(resolve_workload("workload-1", traces_dir))[:count]
    return [replace(j, epochs=epochs) for j in jobs]


def golden_run(traces_dir: Path, models: dict[str, AppModel]) -> dict[str, dict[str, float | None]]:
    jobs = slice_jobs(traces_dir)
    cluster = Cluster.uniform(4, 4, 2)
    return {
        name: json_safe(simulate(jobs, models, cluster, make_policy(name), SimConfig()).summary())
        for name in POLICIES.names(GPU_POOL)
    }


def test_golden_trace_metrics(traces_dir: Path, models: dict[str, AppModel]) -> None:
    """Regression: a short deterministic run's metrics match the committed ones (regenerate
    with FAASML_REGEN_GOLDEN=1 after an intended change, and say why in the commit)."""
    got = golden_run(traces_dir, models)
    if os.environ.get("FAASML_REGEN_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    want: dict[str, Any] = json.loads(GOLDEN.read_text())
    assert set(got) == set(want)
    for policy, metrics in want.items():
        for key in KEYS:
            value = got[policy][key]
            assert value is not None
            assert math.isclose(value, metrics[key], rel_tol=1e-6, abs_tol=1e-6), (
                policy,
                key,
                got[policy][key],
                metrics[key],
            )


def run(models: dict[str, AppModel], traces_dir: Path, policy: str, **config: Any) -> SimResult:
    return simulate(
        slice_jobs(traces_dir, 10, 2),
        models,
        Cluster.uniform(2, 4),
        make_policy(policy),
        SimConfig(**config),
    )


def test_runs_are_deterministic_under_a_seed(models: dict[str, AppModel], traces_dir: Path) -> None:
    a = run(models, traces_dir, "pollux", noise=0.2, seed=3)
    b = run(models, traces_dir, "pollux", noise=0.2, seed=3)
    c = run(models, traces_dir, "pollux", noise=0.2, seed=4)
    assert a.jobs == b.jobs and a.utilization == b.utilization
    assert a.jobs != c.jobs


def test_every_job_completes_and_metrics_are_consistent(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    for policy in POLICIES.names(GPU_POOL):
        result = run(models, traces_dir, policy)
        s = result.summary()
        assert s["completed"] == s["jobs"] == 10, policy
        for job in result.jobs:
            assert job.start_s is not None and job.completion_s is not None
            assert job.arrival_s <= job.start_s < job.completion_s
            assert job.jct is not None and job.jct >= job.queued_s + job.running_s - 60.0 - 1e-6
            assert job.goodput > 0 and job.speedup > 0
        assert s["avg_jct_s"] <= s["max_jct_s"] and s["p95_jct_s"] <= s["max_jct_s"]
        assert all(0.0 <= u <= 1.0 for _, u in result.utilization)


def test_restart_overhead_slows_elastic_jobs(models: dict[str, AppModel], traces_dir: Path) -> None:
    free = run(models, traces_dir, "optimus", restart_s=0.0).summary()
    costly = run(models, traces_dir, "optimus", restart_s=50.0).summary()
    assert costly["restarts"] > 0
    assert costly["avg_jct_s"] > free["avg_jct_s"]


def test_non_elastic_policies_never_restart(models: dict[str, AppModel], traces_dir: Path) -> None:
    for policy in ("fifo", "sjf"):
        assert run(models, traces_dir, policy).summary()["restarts"] == 0


def test_deadlines_are_met_when_generous(models: dict[str, AppModel], traces_dir: Path) -> None:
    loose = run(models, traces_dir, "elasticflow", deadline_factor=50.0).summary()
    tight = run(models, traces_dir, "elasticflow", deadline_factor=0.3).summary()
    assert loose["deadline_met"] == 1.0
    assert tight["deadline_met"] < loose["deadline_met"]


def test_stopping_early_leaves_jobs_unfinished(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    result = run(models, traces_dir, "fifo", max_time_s=600.0)
    assert result.summary()["completed"] < 10
    assert max(t for t, _ in result.utilization) <= 600.0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"round_s": 0.0}, "round is 0.0"),
        ({"restart_s": -1.0}, "restart_s is -1.0"),
        ({"noise": -0.1}, "noise is -0.1"),
        ({"deadline_factor": 0.0}, "deadline_factor is 0.0"),
    ],
)
def test_bad_configs_name_the_value(config: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SimConfig(**config)


def test_unknown_application_is_an_error(models: dict[str, AppModel]) -> None:
    with pytest.raises(ConfigError, match="unknown application 'gpt'"):
        simulate([Job("x", "gpt", 0.0, 1, 8)], models, Cluster.uniform(1, 4), make_policy("fifo"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", ["fifo", "fapes"])
def test_idle_time_before_far_arrivals_is_skipped_with_identical_results(
    models: dict[str, AppModel], traces_dir: Path, policy: str
) -> None:
    """Arrivals at Unix-time scale (6e8 s = 10^7 rounds) finish at once and give the
    same records, shifted, as at time 0; utilisation counts the skipped rounds as idle."""
    jobs = slice_jobs(traces_dir, 6, 2)
    shift = 60.0 * 10**7
    late = [replace(j, arrival_s=j.arrival_s + shift) for j in jobs]
    cluster = Cluster.uniform(2, 4)
    base = simulate(jobs, models, cluster, make_policy(policy), SimConfig())
    far = simulate(late, models, cluster, make_policy(policy), SimConfig())
    assert len(far.utilization) <= len(base.utilization) + 1
    for a, b in zip(base.jobs, far.jobs, strict=True):
        assert a.completion_s is not None and b.completion_s is not None
        assert math.isclose(b.completion_s - shift, a.completion_s, abs_tol=1e-5)
        assert (a.restarts, a.queued_s) == (b.restarts, b.queued_s)
    rounds = base.utilization[-1][0] / 60.0 + 1
    want = base.summary()["avg_utilization"] * rounds / (rounds + 10**7)
    assert math.isclose(far.summary()["avg_utilization"], want, rel_tol=1e-9)


def test_an_idle_gap_between_jobs_is_skipped(models: dict[str, AppModel], traces_dir: Path) -> None:
    """A job arriving long after the others finished is simulated as if it were alone, and
    the idle rounds between are one utilisation point that stands for all of them."""
    first, second = slice_jobs(traces_dir, 2, 1)
    second = replace(second, arrival_s=3e6 + 17.0)
    cluster = Cluster.uniform(2, 4)
    both = simulate([first, second], models, cluster, make_policy("pollux"), SimConfig())
    alone = simulate([second], models, cluster, make_policy("pollux"), SimConfig())
    solo = simulate([first], models, cluster, make_policy("pollux"), SimConfig())
    assert len(both.utilization) < 200
    assert both.jobs == (solo.jobs[0], alone.jobs[0])

    def busy_rounds(result: SimResult) -> float:
        rounds = result.utilization[-1][0] / 60.0 + 1
        return result.summary()["avg_utilization"] * rounds

    assert math.isclose(busy_rounds(both), busy_rounds(solo) + busy_rounds(alone))


def test_stopping_early_counts_the_idle_rounds_before_the_limit(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    (job,) = slice_jobs(traces_dir, 1, 1)
    far = replace(job, arrival_s=1e9)
    result = simulate(
        [far], models, Cluster.uniform(1, 4), make_policy("fifo"), SimConfig(max_time_s=6000.0)
    )
    assert [t for t, _ in result.utilization] == [0.0, 6000.0]
    assert result.summary()["avg_utilization"] == 0.0
    assert result.jobs[0].completion_s is None


def test_a_round_below_the_clock_resolution_is_refused(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    """At 1e11 s a round of 1e-6 s no longer moves a double-precision clock: refused with
    the rule rather than a loop that never advances."""
    (job,) = slice_jobs(traces_dir, 1, 1)
    far = replace(job, arrival_s=1e11)
    with pytest.raises(ConfigError, match="below the clock's resolution"):
        simulate([far], models, Cluster.uniform(1, 4), make_policy("fifo"), SimConfig(round_s=1e-6))
