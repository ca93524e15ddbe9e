from __future__ import annotations

import json
from pathlib import Path

import pytest

from faasml.cli.main import main


def small_trace(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(
        "name,time,application,num_replicas,batch_size,epochs,deadline\n"
        "a,0,cifar10,2,256,2,\n"
        "b,30,bert,4,24,1,7200\n"
        "c,90,ncf,1,32768,1,\n"
        "d,100,deepspeech2,2,40,1,\n"
    )
    return path


def test_simulate_compares_policies_as_json(
    tmp_path: Path, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "cluster",
            "simulate",
            str(small_trace(tmp_path)),
            "--policy",
            "fapes",
            "--compare",
            "fifo,pollux",
            "--servers",
            "2",
            "--gpus-per-server",
            "4",
            "--round",
            "30s",
            "--traces",
            str(traces_dir),
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in data["results"]] == ["fapes", "fifo", "pollux"]
    assert data["round_s"] == 30.0
    for result in data["results"]:
        assert result["summary"]["completed"] == 4
        assert result["summary"]["deadline_met"] in (0.0, 1.0)
        assert len(result["jobs"]) == 4


def test_simulate_prints_a_table_and_plots(
    tmp_path: Path,
    traces_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    plots = tmp_path / "plots"
    code = main(
        [
            "cluster",
            "simulate",
            str(small_trace(tmp_path)),
            "--policy",
            "sjf",
            "--compare",
            "optimus,elasticflow",
            "--servers",
            "2",
            "--traces",
            str(traces_dir),
            "--plot",
            str(plots),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    for name in ("sjf", "optimus", "elasticflow", "avg JCT"):
        assert name in out
    assert (plots / "jct_cdf.png").stat().st_size > 0
    assert (plots / "utilization.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "tiresias"], "unknown gpu-pool policy 'tiresias'"),
        (["--round", "soon"], "--round"),
        (["--restart", "-3"], "--restart is '-3'"),
        (["--servers", "0"], "servers is 0"),
    ],
)
def test_bad_options_fail_with_a_clear_message(
    tmp_path: Path,
    traces_dir: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    code = main(
        ["cluster", "simulate", str(small_trace(tmp_path)), "--traces", str(traces_dir), *args]
    )
    assert code == 2
    assert message in capsys.readouterr().err.replace("\n", " ")


def test_a_missing_trace_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "simulate", "no-such-trace", "--traces", str(tmp_path)]) == 2
    assert "no-such-trace" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name,time,application\nj\xe9,1,bert\n".encode("latin-1"), "is not UTF-8 text"),
        (b"name,time,application,num_replicas,batch_size\n", "has no jobs"),
        (b"name,time,application,num_replicas,batch_size\nj,inf,bert,1,12\n", "must be finite"),
    ],
)
def test_a_bad_trace_file_is_one_error_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    content: bytes,
    message: str,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    assert main(["cluster", "simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message in err and str(path) in err


def test_the_shipped_workloads_run_without_a_traces_option(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAASML_TRACES", raising=False)
    args = ["cluster", "simulate", "workloads-0.5/workload-1.csv", "--policy", "fifo"]
    assert main([*args, "--until", "600", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["results"][0]["summary"]["jobs"] == 80


def test_simulate_with_inference_services_and_loaning(
    tmp_path: Path, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = tmp_path / "services.yaml"
    services.write_text(
        "services:\n  - name: web\n    capacity_rps: 10\n    slo_ms: 100\n    max_scale: 8\n"
        "    rate: {tidal: {peak_rps: 60, days: 1, seed: 2}}\n"
    )
    args = ["cluster", "simulate", str(small_trace(tmp_path)), "--servers", "4"]
    args += ["--traces", str(traces_dir), "--inference", str(services)]
    assert main([*args, "--loaning", "dedicated", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["loaning"] == "dedicated" and data["inference"] == ["web"]
    summary = data["results"][0]["summary"]
    assert summary["slo_requests"] == 1.0 and summary["servers_loaned"] == 0
    assert main([*args, "--loaning", "one-way"]) == 0
    assert "SLO reqs" in capsys.readouterr().out
    assert main([*args, "--loaning", "sometimes"]) == 2
    assert "loaning is 'sometimes'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--loaning", "sometimes"], "loaning is 'sometimes'"),
        (["--jobs", "0"], "--jobs is 0, but must be >= 1"),
        (["--steps", "0"], "steps is 0, but must be >= 1"),
        (
            ["--forecast", "ewma"],
            "forecast is 'ewma', but must be one of: exact, last, max, seasonal, seasonal-last",
        ),
        (["--headroom", "0.5"], "headroom is 0.5, but must be from 1 to 10"),
        (["--inference-start", "3s"], "inference_start_s is 3.0, but must be from 0 to the"),
    ],
)
def test_cluster_run_refuses_bad_settings_before_starting_ray(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["cluster", "run", str(small_trace(tmp_path)), *extra]) == 2
    assert message in capsys.readouterr().err
