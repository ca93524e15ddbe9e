"""A Ctrl-C on `faasml tune --platform ray|lithops` ends as on the local platform: one
`interrupted: …` line on stderr, exit status 130, the record 'interrupted', and no function
left running; nothing from Ray's or Lithops' own processes and threads reaches the console."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .tiny_jobs import four_trial_tune_job

JOB = four_trial_tune_job("interrupt", epochs_per_stage=1)

# `faasml tune` (the command line's own main) whose run, once its first segment is recorded,
# waits as a long segment would, so it is still running when the test stops it; at its end it
# names the processes it left running (its platform must have stopped them).
SLOW_TUNE = """
import os
import signal
import sys
import time

from faasml.cli import run as cli_run
from faasml.runtime.runs.session import TuneRun


class SlowRun(TuneRun):
    segments = 0

    def _on_segment(self, trial, segment):
        super()._on_segment(trial, segment)
        SlowRun.segments += 1
        if SlowRun.segments == 1:
            time.sleep(3600)


cli_run.TuneRun = SlowRun
signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal, not inherited
from faasml.cli.main import main

code = main(sys.argv[1:])


def command(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace(chr(0), " ")
    except OSError:
        return ""  # ended meanwhile


tasks = [f"/proc/self/task/{task}/children" for task in os.listdir("/proc/self/task")]
left = [pid for path in tasks for pid in open(path).read().split()]
# Lithops' cleaner deletes the run's temporary objects in its own session and then exits.
left = [command(pid) for pid in left if "lithops.scripts.cleaner" not in command(pid)]
if any(left):
    print(f"processes left running: {left}", file=sys.stderr)
sys.exit(code)
"""


def _committed(run_dir: Path) -> bool:
    """The record says the run is running and holds a checkpoint (a segment committed)."""
    try:
        record = json.loads((run_dir / "record.json").read_text())
    except (OSError, ValueError):
        return False  # not written yet (it is replaced whole, never seen half-written)
    return record["status"] == "running" and any(t["checkpoint"] for t in record["trials"])


@pytest.mark.parametrize("platform", ["ray", "lithops"])
def test_ctrl_c_ends_a_run_in_one_line(platform: str, tmp_path: Path) -> None:
    pytest.importorskip(platform)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(JOB))
    run_dir = tmp_path / "run"
    argv = ["tune", str(job), "--budget", "0.05", "--run-dir", str(run_dir)]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a new local instance
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_TUNE, *argv, "--platform", platform],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # its platform's processes' output too: they inherit it
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        cwd=tmp_path,
        env=env,
    )
    try:
        deadline = time.monotonic() + 300  # a hang detector: the loop ends on the record
        while not _committed(run_dir):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the run never recorded that it was running"
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: every process of the group
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith("interrupted: ") and f"faasml resume {run_dir}" in lines[0]
    assert process.returncode == 130
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "interrupted"
    assert record["events"][-1]["text"] == "interrupted: Ctrl-C"
