"""The local platform's instances forked from its template process: they get their own thread
counts and environment, end and fail as new processes do, and a template that cannot be used
makes the platform start new processes instead, never fail a start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import FunctionError, open_platform
from faasml.runtime.platforms.local import LocalPlatform

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="the template needs Linux"
)

FN = "faasml.testing.functions"

_PROBE = """
import os

import numpy

def probe(_):
    import threadpoolctl, torch
    blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    return {
        "torch": torch.get_num_threads(),
        "blas": blas,
        "memory": os.environ["FAASML_FUNCTION_MEMORY_MB"],
        "vcpus": float(os.environ["FAASML_FUNCTION_VCPUS"]),
        "parent": os.getppid(),
        "draw": float(numpy.random.random()),
    }
"""


@contextmanager
def _local(**options: Any) -> Iterator[LocalPlatform]:
    platform = LocalPlatform(load_catalog("local"), cpu="none", **options)
    try:
        yield platform
    finally:
        platform.close()


def _on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    """A module the functions (and the template) can import, through the environment."""
    (tmp_path / f"{name}.py").write_text(text)
    paths = [str(tmp_path), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.syspath_prepend(str(tmp_path))  # the platform resolves a function's name here


def test_a_forked_function_gets_the_threads_and_memory_of_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The template imported torch and numpy with one thread each: a function of 2 vCPUs
    (3538 MB at the local catalog's 1769 MB per vCPU) still gets two, one of 1 vCPU one."""
    _on_path(tmp_path, monkeypatch, "template_probe", _PROBE)
    catalog = load_catalog("local")
    one = int(catalog.platform.mb_per_vcpu)
    with _local(preload=("torch", "numpy.random")) as platform:
        assert platform.start == "template"
        two_vcpus = platform.invoke("template_probe:probe", None, 2 * one).result(timeout=120)
        one_vcpu = platform.invoke("template_probe:probe", None, one).result(timeout=120)
        assert platform.start == "template", platform.start_fallback
    assert two_vcpus["torch"] == 2 and one_vcpu["torch"] == 1
    assert set(two_vcpus["blas"]) <= {2} and set(one_vcpu["blas"]) <= {1}
    assert two_vcpus["memory"] == str(2 * one) and one_vcpu["memory"] == str(one)
    assert two_vcpus["vcpus"] == pytest.approx(2.0) and one_vcpu["vcpus"] == pytest.approx(1.0)
    # forked by the template, not started by this process; numpy's generator seeded anew
    assert two_vcpus["parent"] == one_vcpu["parent"] != os.getpid()
    assert two_vcpus["draw"] != one_vcpu["draw"]


def test_a_forked_function_ends_and_fails_as_a_process_does() -> None:
    with _local() as platform:
        crashed = platform.invoke(f"{FN}:exit_process", 3, 256)
        with pytest.raises(FunctionError, match=r"process ended \(exit status 3\)"):
            crashed.result(timeout=120)
        over = platform.invoke(f"{FN}:allocate", 512, 256)
        with pytest.raises(FunctionError) as caught:
            over.result(timeout=60)
        assert caught.value.kind == "out-of-memory"
        late = platform.invoke(f"{FN}:sleep", 30.0, 256, timeout_s=1.0)
        with pytest.raises(FunctionError) as caught:
            late.result(timeout=60)
        assert caught.value.kind == "timeout"
        running = platform.invoke(f"{FN}:sleep", 30.0, 320)
        pid = platform.invoke(f"{FN}:pid", None, 384).result(timeout=60)
        assert platform.start == "template", platform.start_fallback
    assert running.done()  # closing the platform stopped it
    with pytest.raises(OSError):
        os.kill(pid, 0)  # and every other instance is gone


def test_a_forked_function_killed_reports_its_signal() -> None:
    with _local() as platform:
        pid = platform.invoke(f"{FN}:pid", None, 256).result(timeout=120)
        running = platform.invoke(f"{FN}:sleep", 30.0, 256)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(FunctionError, match=r"process ended \(exit status -9\)"):
            running.result(timeout=60)


def test_resident_memory_is_watched_in_a_forked_function() -> None:
    with _local(address_space_limit=False) as platform:
        over = platform.invoke(f"{FN}:allocate", 600, 256)
        with pytest.raises(FunctionError, match="resident memory over 256 MB") as caught:
            over.result(timeout=60)
        assert caught.value.kind == "out-of-memory"


def test_a_template_with_threads_is_not_forked_and_functions_still_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preloaded module that starts a thread at import makes the template unsafe to fork:
    the instances start as new processes, the first one (queued for the template) too."""
    thread_module = "import threading, time\n"
    thread_module += "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"
    _on_path(tmp_path, monkeypatch, "starts_a_thread", thread_module)
    with _local(preload=("starts_a_thread",)) as platform:
        first = platform.invoke(f"{FN}:pid", None, 256)
        second = platform.invoke(f"{FN}:pid", None, 320)
        pids = {first.result(timeout=120), second.result(timeout=120)}
        assert len(pids) == 2
        assert platform.start == "process"
        assert platform.start_fallback is not None and "threads" in platform.start_fallback
        assert platform.cold_starts == 2
        assert all(i.billed is not None and i.billed.cold for i in (first, second))


def test_a_dead_template_makes_the_platform_start_processes() -> None:
    """Its instances die with it (reported as ended); the next start is a new process."""
    with _local() as platform:
        platform.invoke(f"{FN}:pid", None, 256).result(timeout=120)
        running = platform.invoke(f"{FN}:sleep", 30.0, 256)  # on the warm forked instance
        template = platform._starts.template
        assert template is not None
        template.kill()
        with pytest.raises(FunctionError, match=r"process ended \(exit status -9\)"):
            running.result(timeout=60)
        after = platform.invoke(f"{FN}:echo", 7, 320)
        assert after.result(timeout=120) == 7
        assert after.billed is not None and after.billed.cold
        assert platform.start == "process"
        assert platform.start_fallback is not None and "ended" in platform.start_fallback


def test_an_unknown_start_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"start='fork': must be one of template, process"):
        open_platform("local", load_catalog("local"), start="fork")


_KILLED_AFTER_START = """
import os, signal
from faasml.catalog import load_catalog
from faasml.runtime.platforms.contract import open_platform
platform = open_platform("local", load_catalog("local"), cpu="none")
pid = platform.invoke("faasml.testing.functions:pid", None, 256).result(timeout=120)
print(pid, platform._starts.template.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_platform_leaves_no_template_and_no_forked_instance(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_START],
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    pids = [int(word) for word in done.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 60
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_running(pid) for pid in pids), "an instance or the template outlived it"
    assert done.stderr == b""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_the_template_start_is_not_a_function_cold_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing the runtime once is the platform's start-up (``ready``), not part of the
    first function's cold start: that one is dispatched, and its start billed, after the
    template has imported its preloaded modules (a monotonic stamp both processes read)."""
    stamp = tmp_path / "imported_at"
    module = "import os, time\ntime.sleep(1.0)\n"
    module += "open(os.environ['IMPORT_STAMP'], 'w').write(repr(time.monotonic()))\n"
    monkeypatch.setenv("IMPORT_STAMP", str(stamp))
    _on_path(tmp_path, monkeypatch, "slow_import", module)
    with _local(preload=("slow_import",)) as platform:
        first = platform.invoke(f"{FN}:echo", 1, 256)
        assert first.result(timeout=120) == 1
        assert platform.start == "template", platform.start_fallback
        imported_at = float(stamp.read_text())
        assert first.dispatched >= imported_at
        assert first.billed is not None and first.billed.cold


def test_a_forked_function_sees_the_path_and_folder_of_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module put on ``PYTHONPATH`` and a working directory changed after the template
    started reach the next instance, as they reach a process started then."""
    with _local() as platform:
        platform.invoke(f"{FN}:echo", 1, 256).result(timeout=120)  # the template is up
        later = tmp_path / "later"
        later.mkdir()
        _on_path(
            later,
            monkeypatch,
            "added_later",
            "import os\n\ndef where(_):\n    return os.getcwd()\n",
        )
        monkeypatch.chdir(tmp_path)
        assert platform.invoke("added_later:where", None, 320).result(timeout=120) == str(tmp_path)
        assert platform.start == "template", platform.start_fallback
