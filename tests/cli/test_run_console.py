"""The console of a real run: at 80 columns in a pseudo-terminal nothing is cut or wrapped
mid-word (the elapsed time whole, the probe's steps, the trial table by the run's metric);
piped, no animation; the time the plan leaves, stage by stage (pure)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import yaml
from rich.cells import cell_len

from faasml.cli.run_console import StageLeft, clock, eta_line, time_left
from faasml.runtime.record.records import Estimate, PlanRecord, StageRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.types import Allocation

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
CLOCK = re.compile(r"\d+:\d\d:\d\d")


def _job(folder: Path) -> Path:
    """Four logistic-regression trials, two stages, ranked by validation accuracy."""
    job = {
        "name": "console-accuracy",
        "model": "logistic-regression",
        "dataset": {"synthetic": "higgs-like", "samples": 1500, "test_fraction": 0.2},
        "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.5},
        "search_space": {"optimizer.lr": {"loguniform": [0.01, 0.5]}},
        "tuning": {
            "trials": 4,
            "reduction_factor": 2,
            "epochs_per_stage": 1,
            "stages": 2,
            "metric": "accuracy",
        },
        "batch_size": 100,
        "seed": 1,
        "catalog": "local",
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def _argv(folder: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "faasml.cli.main",
        "tune",
        str(_job(folder)),
        "--budget",
        "0.05",
        "--run-dir",
        str(folder / "run"),
        "--reprofile",  # measured here: the probe's steps are shown
    ]


def _plain_env() -> dict[str, str]:
    """The environment without the settings that make rich take a pipe for a terminal or a
    terminal for a pipe."""
    unset = ("TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR", "NO_COLOR")
    return {k: v for k, v in os.environ.items() if k not in unset}


def _in_terminal(argv: list[str], columns: int = 80, lines: int = 24) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal of ``columns`` × ``lines`` as its stdout and
    stderr; its exit code and everything it wrote."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    env = {**_plain_env(), "COLUMNS": str(columns), "LINES": str(lines), "TERM": "xterm-256color"}
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 600)
            if not ready:  # hung: fail rather than wait for ever
                process.kill()
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed: the process is done
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return process.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def _screen_lines(raw: str) -> list[str]:
    """Every line the terminal was given (each redraw of the live display too), without
    colours and cursor moves."""
    return [line for line in re.split(r"\r\n|\r|\n", ANSI.sub("", raw)) if line.strip()]


def test_the_console_at_80_columns_cuts_nothing(tmp_path: Path) -> None:
    code, raw = _in_terminal(_argv(tmp_path))
    lines = _screen_lines(raw)
    assert code == 0, "\n".join(lines[-20:])
    too_wide = [line for line in lines if cell_len(line) > 80]
    assert not too_wide
    text = "\n".join(lines)
    assert "…" not in text  # rich's mark of a cut
    # The status line's elapsed time is whole, as H:MM:SS, at the line's end.
    status = [line for line in lines if line.startswith("stage ") and " alive · " in line]
    assert status
    assert all(CLOCK.fullmatch(line.rsplit(" · ", 1)[1].strip()) for line in status)
    # The probe's steps as they happened, then planning; the plan's time left by stage.
    assert "probe step 1 done: footprint and compute" in text
    assert any("Planning:" in line for line in lines)
    assert any(line.startswith("ETA ") and "by the plan" in line for line in lines)
    # Long lines wrapped at word boundaries: every word of the profile is whole (the event
    # has it on one line, its facts apart by "; ", the console one fact a line).
    record = RunDir(tmp_path / "run").read_record()
    profile = next(e.text for e in record.events if e.text.startswith("job profile in "))
    summary = profile.split(": ", 1)[1]
    assert len(summary) > 80 and {w.rstrip(";") for w in summary.split()} <= set(text.split())
    # The trial table ranks by the run's metric and mode, every trial in it.
    assert any("validation accuracy (max)" in line for line in lines)
    header = [i for i, line in enumerate(lines) if line.startswith(" trial ")]
    assert all("validation accuracy (max)" in lines[i] for i in header)
    final = lines[header[-1] :]
    rows = [line.split() for line in final if re.match(r"\s+\d+\s+(done|pruned)\s", line)]
    assert sorted(int(r[0]) for r in rows) == [t.trial_id for t in record.trials]
    last = {t.trial_id: t.last["val_accuracy"] for t in record.trials}
    for row in rows:
        assert row[2] == f"{last[int(row[0])]:.4g}"
    best = record.best
    assert best is not None
    assert any(line.startswith(f"Best: trial {best.trial} (") for line in lines)
    assert "validation accuracy" in text.split(f"Best: trial {best.trial}", 1)[1].split("\n")[0]


def test_piped_the_console_prints_lines_not_animation(tmp_path: Path) -> None:
    result = subprocess.run(
        _argv(tmp_path),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**_plain_env(), "COLUMNS": "80"},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "\r" not in out and "\x1b" not in out  # no redraws, no colours
    lines = out.splitlines()
    assert len(lines) == len(set(lines))  # no line printed again as a frame of a display
    steps = [line for line in lines if line.startswith("probe step ")]
    assert steps[0].startswith("probe step 1: footprint and compute on ")
    assert "planning" in lines
    stages = [line for line in lines if " alive, spent " in line]
    assert [line.split(":")[0] for line in stages] == ["stage 1/2", "stage 2/2"]
    assert all(re.search(r", ETA \d+:\d\d:\d\d$", line) for line in stages)
    events = [line for line in lines if re.match(r"\[\d+:\d\d:\d\d\] ", line)]
    assert any("] stage 1 done: kept trials " in line for line in events)
    assert any(line.startswith("Best: trial ") and "validation accuracy" in line for line in lines)


def _stage(index: int, planned_s: float, **figures: Estimate) -> StageRecord:
    return StageRecord(
        index=index,
        trials=4 // index,
        epochs=1,
        allocation=Allocation(1, 1024, "embedded", "allreduce"),
        epoch_time_s=planned_s,
        epoch_cost_usd=0.001,
        time_s=planned_s,
        cost_usd=0.001,
        **figures,  # type: ignore[arg-type]
    )


def test_the_time_left_follows_the_latest_prediction_of_each_stage() -> None:
    plan = PlanRecord(
        planner="exact",
        stages=[
            _stage(1, 30.0, predicted=Estimate(20.0, 0.001)),
            _stage(2, 40.0, predicted=Estimate(35.0, 0.001), repredicted=Estimate(50.0, 0.001)),
            _stage(3, 60.0, replanned=Estimate(45.0, 0.001)),
        ],
        time_s=130.0,
        cost_usd=0.003,
        between_stages_s=2.0,
    )
    # stage 1 under way for 5 s of its predicted 20
    assert time_left(plan, 0, 5.0) == [
        StageLeft(1, 15.0),
        StageLeft(2, 52.0),  # re-predicted, after the time between stages
        StageLeft(3, 47.0),  # as re-planned
    ]
    # stage 2 has run past its time: none left of it, and it says so
    left = time_left(plan, 1, 61.0)
    assert left == [StageLeft(2, 0.0, over=True), StageLeft(3, 47.0)]
    assert eta_line(left) == "ETA 0:00:47 by the plan (stage 2: over its plan, 3: 0:00:47)"
    assert eta_line(time_left(plan, 3, 0.0)) == "ETA: the plan's stages are done"
    assert clock(3725.9) == "1:02:05"
