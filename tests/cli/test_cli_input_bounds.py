"""Inputs the commands once accepted without a bound or a check (gigabytes of allocations, hours
of simulation, minutes of Ray retries, a traceback or a silently ignored value) each give one
`error: ...` line naming the value and the rule, before any long work."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from faasml._ray_config import check_reachable
from faasml.cli.main import main
from faasml.exceptions import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Exit code and the error line of ``faasml argv`` (stderr must be that one line)."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return code, lines[0]


@pytest.mark.parametrize(
    ("option", "size"),
    [
        (["--memory-step", "1"], "91,017,000 allocations (10,113 memory sizes × 1,000 function"),
        (["--max-functions", "1000000000"], "(159 memory sizes × 1,000,000,000 function counts"),
    ],
)
def test_plan_train_refuses_a_space_too_large_to_hold(
    capsys: pytest.CaptureFixture[str], option: list[str], size: str
) -> None:
    code, line = run(capsys, "plan", "train", "lr-higgs", "--budget", "1", *option)
    assert code == 2
    assert size in line
    assert "may hold at most 8,000,000" in line and "--memory-step" in line


def test_plan_tune_refuses_the_same_space(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "tune", "lr-higgs", "--trials", "16", "--budget", "1", "--memory-step", "1"]
    code, line = run(capsys, *argv)
    assert code == 2 and "91,017,000 allocations" in line


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--true-epochs", "1000000000"], "--true-epochs is 1e+09, but must be between 1 and"),
        (["--true-epochs", "inf"], "--true-epochs is inf, but must be between 1 and 1,000"),
        (["--noise", "nan"], "--noise is nan, but must be a finite number >= 0"),
        (["--seed", "-1"], "--seed is -1, but must be an integer >= 0"),
    ],
)
def test_simulate_train_bounds(
    capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    argv = ["simulate", "train", "lr-higgs", "--budget", "5", "--family", "inverse", *option]
    code, line = run(capsys, *argv)
    assert code == 2
    assert message in line


def test_simulate_tune_refuses_a_negative_seed(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "tune", "lr-higgs", "--trials", "16", "--budget", "1", "--seed", "-1"]
    code, line = run(capsys, *argv)
    assert code == 2
    assert line == "error: the value of --seed is -1, but must be an integer >= 0"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--trials", "16", "--reduction-factor", "1000000000"], "must be at most --trials (16)"),
        (["--hyperband", "9", "--reduction-factor", "10"], "must be at most --hyperband (9)"),
        (["--trials", "1000000000000"], "--trials is 1,000,000,000,000, but must be at most"),
        (["--hyperband", "1000000000"], "largest bracket would start"),
    ],
)
def test_plan_tune_job_bounds(
    capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    code, line = run(capsys, "plan", "tune", "lr-higgs", "--budget", "1", *option)
    assert code == 2
    assert message in line


def test_plan_tune_keeps_a_reduction_factor_equal_to_the_trials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "tune", "lr-higgs", "--budget", "1", "--trials", "4", "--reduction-factor"]
    assert main([*argv, "4", "--json"]) == 0
    assert main([*argv[:-2], "1", "--json"]) == 0  # one trial, the default η of 2
    capsys.readouterr()


def test_profile_checks_its_output_folder_before_profiling(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, line = run(capsys, "profile", str(EXAMPLES / "train-logreg.yaml"), "--out", "/dev/null/x")
    assert code == 2
    assert "--out is '/dev/null/x', but must be a folder faasml can create" in line


CLUSTER = ["cluster", "simulate", "workload-6", "--until", "1h"]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--noise", "nan"], "noise is nan, but must be a finite number >= 0"),
        (["--servers-per-switch", "0"], "servers_per_switch is 0, but must be >= 1"),
        (["--seed", "-1"], "--seed is -1, but must be an integer >= 0"),
        (["--deadline-factor", "nan"], "deadline_factor is nan, but must be a finite number > 0"),
        (["--until", "nan"], "--until is 'nan', but must be >= 0 seconds"),
    ],
)
def test_cluster_simulate_bounds(
    capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    code, line = run(capsys, *CLUSTER, *option)
    assert code == 2
    assert message in line


def test_cluster_simulate_plot_into_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "plots"
    taken.write_text("not a folder")
    code, line = run(capsys, *CLUSTER, "--plot", str(taken))
    assert code == 2
    assert "--plot" in line and "it names an existing file" in line


def test_cluster_trace_with_min_batch_above_max_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "name,time,application,num_replicas,batch_size,min_batch,max_batch\n"
        "j1,0,cifar10,1,128,512,256\n"
    )
    code, line = run(capsys, "cluster", "simulate", str(trace))
    assert code == 2
    assert f"{trace}:2: job 'j1': the value of max_batch is 256, but must be >= min_batch" in line


def test_check_reachable_passes_a_listening_address_and_refuses_a_closed_one() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        check_reachable(f"127.0.0.1:{port}")
        check_reachable(f"ray://127.0.0.1:{port}")
    check_reachable("auto")  # left to Ray
    with pytest.raises(ConfigError, match=r"cannot reach the Ray cluster at '127\.0\.0\.1:1'"):
        check_reachable("127.0.0.1:1")
    with pytest.raises(ConfigError, match="has port 70000, but ports are 1-65535"):
        check_reachable("127.0.0.1:70000")


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_run_on_an_unreachable_ray_address_fails_at_once(tmp_path: Path) -> None:
    argv = [str(EXAMPLES / "train-logreg.yaml"), "--budget", "1", "--platform", "ray"]
    argv += ["--address", "127.0.0.1:1", "--run-dir", str(tmp_path / "run")]
    result = subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", "train", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: cannot reach the Ray cluster at '127.0.0.1:1': nothing accepts a connection on "
        "127.0.0.1 port 1 (Connection refused; a TCP connect with a 5 s timeout)"
    ]
