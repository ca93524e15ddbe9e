"""Runs for the dashboard's tests: a finished tiny tuning run, a run still running (its
coordinator alive, stopped mid-way), and the dashboard served on a free loopback
port, in this process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml

from faasml.cli.main import main
from faasml.dashboard.server import bind, create_app, url_of

from ..runtime.tiny_jobs import four_trial_tune_job


def write_job(folder: Path) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(four_trial_tune_job("tiny-tune", epochs_per_stage=1)))
    return path


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tuning run that finished: four trials, two stages (`faasml tune`)."""
    folder = tmp_path_factory.mktemp("finished")
    run_dir = folder / "run"
    code = main(["tune", str(write_job(folder)), "--budget", "0.05", "--run-dir", str(run_dir)])
    assert code == 0
    return run_dir


# A tuning run that stops itself (SIGSTOP: alive, not running on) right after the first
# record it writes with two epochs trained and the run under way: a real record, mid-way, as
# the run's own writer wrote it, held there (whatever the machine's speed) for the test.
RUNNING = """
import os, signal, sys
from pathlib import Path
from faasml.job import load_job
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.runs.session import TuneRun
from faasml.types import Constraint

write = RunDir.write_record

def write_then_pause(self, record, **kwargs):
    write(self, record, **kwargs)
    if record.status == "running" and sum(t.epochs_done for t in record.trials) >= 2:
        Path(sys.argv[3]).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGSTOP)

RunDir.write_record = write_then_pause
run = TuneRun(load_job(sys.argv[1]), Constraint(budget_usd=0.05), sys.argv[2])
run.plan()
run.execute()
"""


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


@pytest.fixture(scope="session")
def running_run(tmp_path_factory: pytest.TempPathFactory, finished_run: Path) -> Iterator[Path]:
    """A run in progress: its coordinator alive (stopped mid-way), its record 'running'."""
    folder = tmp_path_factory.mktemp("running")
    run_dir, paused = folder / "run", folder / "paused"
    err = (folder / "stderr").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-c", RUNNING, str(write_job(folder)), str(run_dir), str(paused)],
        stdout=subprocess.DEVNULL,
        stderr=err,
        start_new_session=True,  # its functions too are stopped with it
    )
    deadline = time.monotonic() + 300  # a hang detector: the loop ends on the pause
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if paused.exists() and _stopped(process.pid):
                break
            time.sleep(0.05)
        assert process.poll() is None, (folder / "stderr").read_text()
        assert json.loads((run_dir / "record.json").read_text())["status"] == "running"
        yield run_dir
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        err.close()


@dataclass(frozen=True)
class Served:
    url: str
    requests: list[str]
    """The paths the server answered, in order."""


@pytest.fixture()
def serve() -> Iterator[Any]:
    """``serve(roots, after_first_run=None)``: the dashboard of ``roots`` on a free loopback
    port; ``after_first_run`` is called as the first ``/api/run`` answer is being sent."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(roots: list[str], after_first_run: Any = None) -> Served:
        sock = bind("127.0.0.1", 0)
        requests: list[str] = []
        app = _Recording(create_app(roots), requests, after_first_run)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        servers.append((server, thread))
        while not server.started:  # serving before the first request is sent
            assert thread.is_alive(), "the dashboard's server stopped as it started"
            time.sleep(0.01)
        return Served(url_of(sock), requests)

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join()


class _Recording:
    """An ASGI wrapper that records the paths served and calls a hook as the first run view
    is sent (the body already read from the record, not yet at the browser)."""

    def __init__(self, app: Any, requests: list[str], hook: Any) -> None:
        self.app, self.requests, self.hook = app, requests, hook

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        first = path == "/api/run" and "/api/run" not in self.requests
        self.requests.append(path)

        async def sending(message: Any) -> None:
            if first and self.hook is not None and message["type"] == "http.response.body":
                self.hook()
            await send(message)

        await self.app(scope, receive, sending)
