"""The event-driven replay: preemption loses only the work since the last checkpoint, the
FCFS limit of P running jobs, completions, the policies' splits and MalleTrain's profiling."""

from __future__ import annotations

from pathlib import Path

import pytest

from faasml.cluster.scavenge import (
    ScavengeConfig,
    ScavengeJob,
    ScavengeResult,
    SimExecutor,
    inverse_order,
    load_idle_trace,
    load_jobs,
    make_scavenge_policy,
    simulate_scavenge,
)
from faasml.exceptions import ConfigError

from .scavenge_data import job_row, write_events, write_jobs


def _load(tmp_path: Path, events: list[tuple[float, str, int]], rows: list[str]):  # type: ignore[no-untyped-def]
    trace = load_idle_trace(write_events(tmp_path / "e.csv.gz", events))
    jobs = load_jobs(write_jobs(tmp_path / "j.csv", rows))
    return trace, jobs


def test_preemption_loses_only_the_work_since_the_checkpoint(tmp_path: Path) -> None:
    # Two nodes idle at 0; node b is taken back at 250 s; the trace ends at 355 s.
    trace, jobs = _load(
        tmp_path,
        [(0, "a", 1), (0, "b", 1), (250, "b", 0), (355, "c", 1)],
        [job_row("A", 0, s1=100, sigma=0.0, up=10, down=5, total=1e9)],
    )
    config = ScavengeConfig(checkpoint_s=100, end_s=355)
    result = simulate_scavenge(trace, jobs, make_scavenge_policy("greedy"), config)
    # 0–10 s: start on 2 nodes (scale-up pause); 10–250 s at 200/s = 48,000 samples, of which
    # the checkpoint at 210 s holds 40,000; 8,000 are lost. Restart on 1 node pays the 5 s
    # scale-down; 255–355 s at 100/s adds 10,000.
    assert result.lost_samples == pytest.approx(8_000)
    assert result.samples == pytest.approx(50_000)
    assert result.preemptions == 1
    assert result.job_history["A"] == [(0.0, 2), (250.0, 1)]


def test_a_graceful_rescale_checkpoints_and_loses_nothing(tmp_path: Path) -> None:
    trace, jobs = _load(
        tmp_path,
        [(0, "a", 1), (100, "b", 1), (300, "c", 1)],
        [job_row("A", 0, s1=100, sigma=0.0, up=10, down=5, total=1e9)],
    )
    result = simulate_scavenge(
        trace, jobs, make_scavenge_policy("greedy"), ScavengeConfig(checkpoint_s=1000)
    )
    # 10–100 s at 100/s (9,000), rescale to 2 nodes at 100 s pays 10 s: 110–300 s at 200/s.
    assert result.lost_samples == 0
    assert result.samples == pytest.approx(9_000 + 190 * 200)
    assert result.rescales == 2  # the start and the growth


def test_at_most_p_jobs_run_and_the_queue_is_fcfs(tmp_path: Path) -> None:
    trace, jobs = _load(
        tmp_path,
        [(0, "a", 1), (0, "b", 1), (5000, "c", 1)],
        [
            job_row("A", 0, s1=100, sigma=0.0, up=10, down=5, total=20_000),
            job_row("B", 1, s1=100, sigma=0.0, up=10, down=5, total=20_000),
            job_row("C", 2, s1=100, sigma=0.0, up=10, down=5, total=20_000),
        ],
    )
    result = simulate_scavenge(
        trace, jobs, make_scavenge_policy("greedy"), ScavengeConfig(max_running=1)
    )
    # One at a time on 2 nodes: each takes 10 s + 100 s, in arrival order.
    assert result.finished == 3
    assert [h[0][0] for h in result.job_history.values()] == [0.0, 110.0, 220.0]
    assert sorted(result.jcts) == pytest.approx([110.0, 219.0, 328.0])


def test_equal_splits_and_greedy_fills_in_order(tmp_path: Path) -> None:
    events = [(0, f"n{i}", 1) for i in range(10)] + [(900, "z", 1)]
    rows = [job_row("A", 0, max_nodes=8), job_row("B", 0, max_nodes=8)]
    trace, jobs = _load(tmp_path, events, rows)
    equal = simulate_scavenge(trace, jobs, make_scavenge_policy("equal"))
    greedy = simulate_scavenge(trace, jobs, make_scavenge_policy("greedy"))
    assert [equal.job_history[j][0][1] for j in ("A", "B")] == [5, 5]
    assert [greedy.job_history[j][0][1] for j in ("A", "B")] == [8, 2]


def test_freetrain_prefers_the_job_that_scales(tmp_path: Path) -> None:
    events = [(0, f"n{i}", 1) for i in range(8)] + [(3600, "z", 1)]
    # 8 nodes on LINEAR (800/s) beat 7 + 1 (790/s): no tie for the solver to break.
    rows = [
        job_row("FLAT", 0, s1=90, sigma=0.9, max_nodes=8, total=1e12),
        job_row("LINEAR", 0, s1=100, sigma=0.0, max_nodes=8, total=1e12),
    ]
    trace, jobs = _load(tmp_path, events, rows)
    oracle = simulate_scavenge(trace, jobs, make_scavenge_policy("freetrain"))
    guess = simulate_scavenge(trace, jobs, make_scavenge_policy("freetrain-guess"))

    def first(result: ScavengeResult, job: str) -> int:
        history = result.job_history[job]
        return history[0][1] if history else 0

    assert first(oracle, "LINEAR") == 8 and first(oracle, "FLAT") == 0
    assert oracle.samples >= guess.samples


@pytest.mark.parametrize(
    ("early_stop", "least", "spare", "measured"),
    [
        # Two counts give a valid Amdahl law: early stopping skips 2 and 1 nodes.
        (True, 2, True, [8, 4]),
        # Asked for three, it checks the law at 2 nodes and skips 1 ...
        (True, 3, False, [8, 4, 2]),
        # ... unless the 4 nodes the step to 4 released found no taker (no other job).
        (True, 3, True, [8, 4]),
        (False, 2, True, list(inverse_order(8, 1))),
    ],
)
def test_malletrain_profiles_in_inverse_order_then_uses_the_milp(
    tmp_path: Path, early_stop: bool, least: int, spare: bool, measured: list[int]
) -> None:
    events = [(0, f"n{i}", 1) for i in range(8)] + [(7200, "z", 1)]
    rows = [job_row("A", 0, s1=100, sigma=0.05, max_nodes=8, total=1e12)]
    trace, jobs = _load(tmp_path, events, rows)
    policy = make_scavenge_policy("malletrain")
    policy.early_stop = early_stop  # type: ignore[attr-defined]
    policy.profile_points = least  # type: ignore[attr-defined]
    policy.stop_when_spare = spare  # type: ignore[attr-defined]
    result = simulate_scavenge(trace, jobs, policy, ScavengeConfig(measure_s=60))
    counts = [n for _, n in result.job_history["A"]]
    assert counts[: len(measured)] == measured
    assert counts[len(measured)] == 8  # the fitted curve says 8 nodes are worth it
    assert result.profiled_jobs == 1 and result.profiling_rescales == len(measured)
    assert sorted(policy.monitors["A"].points) == sorted({*measured, 8})  # type: ignore[attr-defined]


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="max running jobs is 0"):
        ScavengeConfig(max_running=0)
    with pytest.raises(ConfigError, match="checkpoint_s is -1"):
        ScavengeConfig(checkpoint_s=-1)
    with pytest.raises(ConfigError, match="unknown idle-nodes policy 'nope'"):
        make_scavenge_policy("nope")


def test_a_node_moved_between_jobs_in_one_step_is_preempted_from_its_new_job() -> None:
    def spec(name: str) -> ScavengeJob:
        return ScavengeJob(name, "m", 0.0, 1, 4, 10.0, 5.0, 1e9, (1, 4), (100.0, 400.0))

    executor = SimExecutor()
    executor.add(spec("X"))
    executor.add(spec("Y"))
    executor.apply(0.0, {"X": ("a", "b"), "Y": ("c",)})
    # b moves from X to Y; Y is named first, so X's release must not drop Y's claim.
    executor.apply(100.0, {"Y": ("b", "c"), "X": ("a",)})
    assert executor.preempt(200.0, ["b"]) == ["Y"]
    assert executor.jobs["Y"].nodes == ("c",) and executor.jobs["X"].nodes == ("a",)
