"""`faasml cluster scavenge`: a table, JSON and plots from small generated files; bad input
is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faasml.cli.main import main

from .scavenge_data import job_row, write_events, write_jobs


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    events = [(0, f"n{i}", 1) for i in range(6)] + [(400, "n0", 0), (900, "n9", 1)]
    rows = [job_row("A", 0, total=5e4), job_row("B", 10, sigma=0.3, total=1e5)]
    return (
        str(write_events(tmp_path / "e.csv.gz", events)),
        str(write_jobs(tmp_path / "j.csv", rows)),
    )


def test_json_compares_policies(files: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cluster", "scavenge", *files, "--compare", "freetrain,greedy,equal", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    names = [r["policy"] for r in data["results"]]
    assert names == ["malletrain", "freetrain", "greedy", "equal"]
    oracle = data["results"][1]
    assert oracle["samples_vs_reference"] == 1.0
    assert all(r["summary"]["samples"] > 0 for r in data["results"])


def test_table_and_plots(
    files: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plots = tmp_path / "plots"
    assert main(["cluster", "scavenge", *files, "--policy", "equal", "--plot", str(plots)]) == 0
    out = capsys.readouterr().out
    assert "equal" in out and "plot:" in out
    assert (plots / "nodes_used.png").stat().st_size > 0
    assert (plots / "job_nodes.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--policy", "nope"], "unknown idle-nodes policy 'nope'"),
        (["--days", "0"], "--days is 0, but must be > 0"),
        (["--max-running", "0"], "--max-running is 0"),
        (["--window", "-1"], "--window is -1"),
    ],
)
def test_bad_options_are_one_line_errors(
    files: tuple[str, str], extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "scavenge", *files, *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_bad_trace_names_file_and_line(
    tmp_path: Path, files: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,node,idle\n-1,a,1\n")
    assert main(["cluster", "scavenge", str(bad), files[1]]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: line 2: time_s is -1" in err.replace("\n", "")
