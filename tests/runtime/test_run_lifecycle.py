"""A run's life in its directory: one process at a time (the run lock), a Ctrl-C or a full disk
stops it in one line with its record resumable, and its report, curves and plots are written
before the record says how it ended, and again from any record by ``faasml report``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import faasml
from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.record.run_lock import LOCK_NAME, RunDirInUseError, lock_run

from .tiny_jobs import four_trial_tune_job

JOB = four_trial_tune_job("lifecycle", epochs_per_stage=1)

# `faasml tune` (the command line's own main) whose run, once its first segment is recorded,
# waits as a long segment would, so it is still running, whatever the machine's speed, when
# the test stops it; or ('full-disk') from then on writes no file past half the record's size
# (RLIMIT_FSIZE: the kernel refuses the next write of the record, EFBIG, as a full disk would).
SLOW_TUNE = """
import os
import resource
import signal
import sys
import time

from faasml.cli import run as cli_run
from faasml.runtime.runs.session import TuneRun

FULL_DISK = sys.argv[1] == "full-disk"


class SlowRun(TuneRun):
    segments = 0

    def _on_segment(self, trial, segment):
        super()._on_segment(trial, segment)
        SlowRun.segments += 1
        if SlowRun.segments > 1:
            return
        if FULL_DISK:
            size = self.dir.record_path.stat().st_size
            resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, resource.RLIM_INFINITY))
        else:
            time.sleep(3600)


cli_run.TuneRun = SlowRun
signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal, not inherited
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, as on a full disk
from faasml.cli.main import main

code = main(sys.argv[2:])
tasks = [f"/proc/self/task/{task}/children" for task in os.listdir("/proc/self/task")]
left = [pid for path in tasks for pid in open(path).read().split()]
if left:  # the run stopped its functions, whatever stopped it
    print(f"functions left running: {left}", file=sys.stderr)
sys.exit(code)
"""


def _job_file(folder: Path) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    return path


def _status(run_dir: Path) -> str | None:
    try:
        return str(json.loads((run_dir / "record.json").read_text())["status"])
    except (OSError, ValueError, KeyError):
        return None  # not written yet (it is replaced whole, never seen half-written)


def _start_slow_tune(tmp_path: Path, mode: str, run_dir: Path) -> subprocess.Popen[str]:
    argv = ["tune", str(_job_file(tmp_path)), "--budget", "0.05", "--run-dir", str(run_dir)]
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_TUNE, mode, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # its functions' output too: they inherit it
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        cwd=tmp_path,
    )


def _committed(run_dir: Path) -> bool:
    """The record says the run is running and holds a checkpoint (a segment committed)."""
    try:
        record = json.loads((run_dir / "record.json").read_text())
    except (OSError, ValueError):
        return False  # not written yet (it is replaced whole, never seen half-written)
    return record["status"] == "running" and any(t["checkpoint"] for t in record["trials"])


def _wait_running(process: subprocess.Popen[str], run_dir: Path) -> None:
    deadline = time.monotonic() + 300  # a hang detector: the loop ends on the record
    while not _committed(run_dir):
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the run never recorded that it was running"
        time.sleep(0.05)


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def test_ctrl_c_stops_a_running_tune_in_one_line_and_resume_finishes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    process = _start_slow_tune(tmp_path, "slow", run_dir)
    try:
        _wait_running(process, run_dir)
        # While it runs, the folder is its alone: neither resume nor a forced tune goes in.
        assert main(["resume", str(run_dir)]) == 2
        job = str(_job_file(tmp_path))
        assert main(["tune", job, "--budget", "0.05", "--run-dir", str(run_dir), "--force"]) == 2
        for line in capsys.readouterr().err.strip().splitlines():
            assert f"is in use by pid {process.pid} on " in line
            assert "tune" in line and "--run-dir" in line  # the holder's command
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: every process of the group
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130
    line = _one_line(stderr)
    assert line.startswith("interrupted: ") and f"faasml resume {run_dir}" in line
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "interrupted"
    assert record["events"][-1]["text"] == "interrupted: Ctrl-C"
    assert any(t["checkpoint"] for t in record["trials"])  # the work done so far is kept

    assert main(["resume", str(run_dir)]) == 0
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "finished"
    assert (run_dir / "report.md").exists()


def test_a_full_disk_stops_the_run_in_one_line_and_resume_finishes_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = _start_slow_tune(tmp_path, "full-disk", run_dir)
    try:
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 1
    line = _one_line(stderr)
    assert line.startswith(f"error: disk full writing {run_dir.resolve()}{os.sep}")  # the record
    assert line.endswith(f"then resume the run with faasml resume {run_dir}")
    assert not list(run_dir.glob(".record.json.*"))  # no temporary file left
    assert _status(run_dir) == "running"  # the last record written whole: resumable
    assert main(["resume", str(run_dir)]) == 0
    assert _status(run_dir) == "finished"


# A process that holds a run directory's lock until it is killed (a password on its command line).
HOLDER = """
import sys, time
from faasml.runtime.record.run_lock import lock_run

with lock_run(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(3600)
"""


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """An empty run directory another process holds the lock of."""
    folder = tmp_path / "held"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), "redis://:hunter2@localhost:6379"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "locked\n"
        yield folder, process
    finally:
        process.kill()
        process.wait()


def test_a_second_run_in_a_held_folder_is_refused_naming_the_holder(
    tmp_path: Path,
    held: tuple[Path, subprocess.Popen[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, holder = held
    assert main(["tune", str(_job_file(tmp_path)), "--budget", "0.05", "--run-dir", str(folder)])
    err = " ".join(capsys.readouterr().err.split())
    assert f"the run directory {folder} is in use by pid {holder.pid} on " in err
    assert "since 20" in err  # when it began
    assert "redis://:***@localhost:6379" in err and "hunter2" not in err  # its command, redacted
    tuner = faasml.Tuner(_job_file(tmp_path), budget=0.05, run_dir=folder)
    with pytest.raises(RunDirInUseError, match=f"in use by pid {holder.pid}"):
        tuner.fit()
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]  # nothing written
    holder.kill()
    holder.wait()
    with lock_run(folder):  # the lock dies with its holder: none is left stale
        RunDir(folder).check_new()  # and the lock file alone is no run


def test_two_tunes_started_together_run_once(tmp_path: Path) -> None:
    """However the two start, one runs and the other is refused in one line."""
    run_dir = tmp_path / "run"
    argv = ["tune", str(_job_file(tmp_path)), "--budget", "0.05", "--run-dir", str(run_dir)]
    command = [sys.executable, "-m", "faasml.cli.main", *argv]
    runs = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outcomes = sorted((p.wait(timeout=300), p.communicate()[1]) for p in runs)
    assert [code for code, _ in outcomes] == [0, 2], outcomes
    refused = _one_line(outcomes[1][1])
    assert "is in use by pid" in refused or "already holds a tune run" in refused
    assert _status(run_dir) == "finished"


def test_a_folder_a_run_is_filling_is_said_in_use_not_empty(tmp_path: Path) -> None:
    """A run writes its folder's first files before its record: a second run started then is
    told the folder is in use (by whom), even with --force, not that it holds no run."""
    run_dir = tmp_path / "run"
    script = (
        "import sys\n"
        "from faasml.runtime.record.run_lock import lock_run\n"
        "with lock_run(sys.argv[1]):\n"
        "    open(sys.argv[1] + '/objects', 'w').close()\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for force in (False, True):
            with pytest.raises(RunDirInUseError, match=f"is in use by pid {holder.pid} "):
                RunDir(run_dir).check_new(force=force)
    finally:
        holder.communicate(timeout=60)
    with pytest.raises(ConfigError, match="is not empty and holds no run"):
        RunDir(run_dir).check_new()


def _finished_run(folder: Path) -> Path:
    run_dir = folder / "run"
    assert (
        main(["tune", str(_job_file(folder)), "--budget", "0.05", "--run-dir", str(run_dir)]) == 0
    )
    return run_dir


def test_faasml_report_writes_report_curves_and_plots_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _finished_run(tmp_path)
    report = (run_dir / "report.md").read_text()
    curves = {p.name: p.read_text() for p in (run_dir / "curves").iterdir()}
    (run_dir / "report.md").unlink()
    shutil.rmtree(run_dir / "curves")
    shutil.rmtree(run_dir / "plots")
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    assert "from the tune run's record (finished)" in capsys.readouterr().out
    assert (run_dir / "report.md").read_text() == report
    assert {p.name: p.read_text() for p in (run_dir / "curves").iterdir()} == curves
    assert (run_dir / "plots" / "loss.png").exists()

    assert main(["report", str(tmp_path)]) == 2  # no record: one line
    assert "has no record.json" in capsys.readouterr().err


def test_the_report_is_written_before_the_record_says_the_run_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator dies as it records the end: the report is there already."""
    write_record = RunDir.write_record

    def dies_at_the_end(self: RunDir, state: RunRecord, *, durable: bool = True) -> None:
        if state.status == "finished":
            raise SystemExit("killed as it recorded the end")
        write_record(self, state, durable=durable)

    monkeypatch.setattr(RunDir, "write_record", dies_at_the_end)
    with pytest.raises(SystemExit):
        _finished_run(tmp_path)
    run_dir = tmp_path / "run"
    assert _status(run_dir) == "running"
    assert "finished" in (run_dir / "report.md").read_text()
    assert (run_dir / "plots" / "loss.png").exists()
