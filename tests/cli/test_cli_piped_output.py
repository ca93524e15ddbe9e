"""Output that is not a terminal (CI logs, `| less`) at COLUMNS=80: tables whole, one row a
line, nothing cut ('…') or wrapped; errors on one line (docs/cli.md)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from faasml.cli._common import say

JOB = ["--trials", "256", "--memory-step", "512"]
PLAN_TRAIN_JSON = ["plan", "train", "lr-higgs", "--budget", "1", "--json"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def piped(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run faasml with stdout and stderr piped, as in a CI log, with an 80-column COLUMNS."""
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    return subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )


def rows(text: str) -> list[str]:
    """Body rows of rich tables: lines that start and end with a vertical rule."""
    return [line for line in text.splitlines() if line.startswith("│") and line.endswith("│")]


def test_plan_tune_tables_are_whole_when_piped() -> None:
    result = piped("plan", "tune", "lr-higgs", *JOB, "--deadline", "10h")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "…" not in out
    assert "┃ stage ┃ trials ┃ epochs ┃ θ = (n × memory, storage) ┃ waves ┃" in out
    body = rows(out)
    # 8 stages, one line each, then the 7 planners compared: no cell wrapped onto a 2nd line.
    assert len(body) == 8 + 7
    for index, line in enumerate(body[:8], start=1):
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        assert cells[0] == str(index)
        assert cells[3].startswith("1 × ") and cells[3].endswith("MB, no sync")
    assert {line.split("│")[1].strip() for line in body[8:]} == {
        "exact",
        "static",
        "static-cheapest",
        "fixed",
        "fixed-pool",
        "even-trials",
        "greedy",
    }
    assert max(len(line) for line in out.splitlines()) > 80  # COLUMNS did not cut it


def test_plan_train_and_simulate_tune_tables_are_whole_when_piped() -> None:
    train = piped("plan", "train", "lr-higgs", "--budget", "0.10")
    assert train.returncode == 0, train.stderr
    assert "…" not in train.stdout
    runners = [line for line in rows(train.stdout) if " MB │" in line]
    assert len(runners) == 5
    for line in runners:
        storage = line.split("│")[3].strip()
        if storage != "none (one function)":
            assert storage.count("/") == 1 and storage.split("/")[1] in {
                "allreduce",
                "scatter-reduce",
                "param-server",
            }
    simulated = piped("simulate", "tune", "lr-higgs", *JOB, "--budget", "2")
    assert simulated.returncode == 0, simulated.stderr
    assert "…" not in simulated.stdout
    stage_rows = rows(simulated.stdout)
    assert [line.split("│")[1].strip() for line in stage_rows] == [str(i) for i in range(1, 9)]
    assert all(") │" in line for line in stage_rows)  # "(predicted)" closes on its own line


def test_a_real_tune_prints_one_plain_progress_line_a_stage_when_piped(tmp_path: Path) -> None:
    result = piped(
        "tune", str(EXAMPLES / "tune-logreg.yaml"), "--budget", "0.05",
        "--run-dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stdout.splitlines() if " alive, spent " in line]
    stages = [line.split(":")[0] for line in progress]
    assert stages == [f"stage {k}/4" for k in range(1, 5)]  # the example's four stages
    assert all(len(line) <= 80 for line in progress)
    assert "━" not in result.stdout and "\x1b" not in result.stdout  # no bar, no escapes
    assert "finished in" in result.stdout
    # The profile, the plan's stages and the summary against the plan: one fact a line.
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Job profile ("))
    facts = [line for line in lines[head + 1 :] if line.startswith("  ")]
    stages = [line for line in lines if line.startswith("  stage ")]
    against = [line for line in lines if line.startswith(("planned ", "predicted ", "measured "))]
    assert len(facts) >= 4 and stages and len(against) == 3
    # Every line within 80 columns, whatever the run's events and notes say; only a word
    # longer than a line (the report's path) stands alone on its line.
    assert all(len(line) <= 80 or " " not in line.strip() for line in lines), lines


def test_running_text_folds_at_80_columns_with_its_units_kept() -> None:
    out = Console(file=io.StringIO(), width=100_000, color_system=None, soft_wrap=False)
    note = (
        "  note: the function timed alone ran slower than the group side by side: timed "
        "again, 0.000453 -> 0.00036 ms per sample kept"
    )
    say(out, note)
    say(out, "[0:00:01] stage 4 re-planned: 1 × 832 MB, embedded/allreduce -> " * 2, indent=10)
    say(out, f"[bold red]LOST[/] {'x' * 90}", markup=True)
    assert isinstance(out.file, io.StringIO)
    lines = out.file.getvalue().splitlines()
    assert lines[:2] == [
        "  note: the function timed alone ran slower than the group side by side: timed",
        "    again, 0.000453 -> 0.00036 ms per sample kept",
    ]
    assert all(len(line) <= 80 for line in lines[2:-2])
    assert all(line.startswith(" " * 10) for line in lines[3:-2])
    assert not any(line.endswith((" 832", " 1")) for line in lines)  # "832 MB" kept whole
    assert lines[-2:] == ["LOST", "  " + "x" * 90]  # no markup, no word cut


def test_job_check_lines_are_whole_when_piped() -> None:
    result = piped("job", "check", str(EXAMPLES / "tune-logreg.yaml"))
    assert result.returncode == 0, result.stderr
    tuning = [line for line in result.stdout.splitlines() if line.strip().startswith("tuning")]
    assert len(tuning) == 1
    assert tuning[0].rstrip().endswith("epoch(s) per stage, by loss")


def test_errors_are_one_line_when_piped() -> None:
    for argv, words in (
        (["plan", "tune", "lr-higgs", *JOB, "--budget", "0.0001"], "least budget that works"),
        (["plan", "train", "lr-higgs", "--budget", "0.000001"], "least budget that works"),
        (["plan", "tune", "lr-higgs", *JOB, "--budget", "5", "--plot", "/proc/nope"], "--plot"),
    ):
        result = piped(*argv)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: ") and words in lines[0]
        assert len(lines[0]) > 80
    usage = piped("plan", "tune", "lr-higgs", "--trials", "many", "--budget", "5")
    assert usage.returncode == 2
    last = usage.stderr.strip().splitlines()[-1]
    assert last == "error: argument --trials: invalid int value: 'many'"


def test_a_reader_that_goes_away_is_no_traceback() -> None:
    env = {**os.environ, "COLUMNS": "80"}
    producer = subprocess.Popen(
        [sys.executable, "-m", "faasml.cli.main", *PLAN_TRAIN_JSON],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert producer.stdout is not None and producer.stderr is not None
    producer.stdout.close()  # like `| head -0`
    err = producer.stderr.read().decode()
    producer.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_an_error_with_line_breaks_and_brackets_prints_as_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from faasml.cli._common import print_error

    print_error("store failed:\n  TimeoutError: no value under [bold]'p/sync/3'[/bold]\n")
    err = capsys.readouterr().err
    assert err == "error: store failed:; TimeoutError: no value under [bold]'p/sync/3'[/bold]\n"


def test_job_check_prints_a_module_factory_model_as_written(tmp_path: Path) -> None:
    """``cnnjob:factory`` stays text: no rich emoji (``:factory:``) or markup in a name."""
    (tmp_path / "cnnjob.py").write_text(
        "from faasml.testing.models import reporting_logreg as factory\n"
    )
    job = tmp_path / "[x]job.yaml"
    job.write_text(
        "name: smiley\nmodel: cnnjob:factory\n"
        "dataset: {synthetic: higgs-like, samples: 200}\n"
        "optimizer: {name: sgd, lr: 0.1}\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", "job", "check", str(job)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "cnnjob:factory: " in result.stdout and "\N{FACTORY}" not in result.stdout
    assert f"({job})" in result.stdout  # the path's brackets are not markup
