"""What only the local platform does: CPU share by memory, the machine's capacity, prewarm."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faasml.catalog import Catalog, load_catalog
from faasml.runtime.platforms.contract import CapacityError, FunctionError, open_platform

FN = "faasml.testing.functions"


def _catalog(**platform_fields: float) -> Catalog:
    catalog = load_catalog("local")
    return dataclasses.replace(
        catalog, platform=dataclasses.replace(catalog.platform, **platform_fields)
    )


@pytest.mark.parametrize("cpu", ["auto", "duty-cycle"])
def test_cpu_share_follows_memory(cpu: str) -> None:
    catalog = load_catalog("local")
    memory = int(catalog.platform.mb_per_vcpu / 4)  # a quarter of a vCPU
    with open_platform("local", catalog, cpu=cpu) as platform:
        if platform.enforcement.cpu == "none":
            pytest.skip("CPU share cannot be enforced here")
        used = platform.invoke(f"{FN}:spin", 1.5, memory).result(timeout=60)
    share = used["cpu_s"] / used["wall_s"]
    assert share < 0.25 + 0.15, f"a quarter-vCPU function used {share:.2f} of a CPU"


def test_capacity_of_the_machine_bounds_concurrency() -> None:
    catalog = _catalog(capacity_vcpus=1.0)
    memory = 1024  # 0.58 vCPU: one fits, two do not
    with open_platform("local", catalog) as platform:
        running = platform.invoke(f"{FN}:sleep", 2.0, memory)
        with pytest.raises(CapacityError, match="capacity"):
            platform.invoke(f"{FN}:sleep", 0.1, memory)
        assert running.result(timeout=60) == 2.0
        # once it is idle, its warm instance serves the next invocation
        again = platform.invoke(f"{FN}:echo", 1, memory)
        assert again.result(timeout=60) == 1
        assert again.billed is not None and not again.billed.cold


def test_prewarm_makes_the_next_invocations_warm() -> None:
    with open_platform("local", load_catalog("local")) as platform:
        assert platform.prewarm(320, 2) == 2
        first = platform.invoke(f"{FN}:pid", None, 320)
        second = platform.invoke(f"{FN}:pid", None, 320)
        pids = {first.result(timeout=60), second.result(timeout=60)}
        assert len(pids) == 2
        assert platform.cold_starts == 2
        bills = platform.take_standalone_bills()
        assert len(bills) == 2 and all(b.cold and b.memory_mb == 320 for b in bills)


def test_warm_instances_counts_the_idle_instances_by_size() -> None:
    with open_platform("local", load_catalog("local"), cpu="none") as platform:
        assert platform.warm_instances() == {}
        assert platform.prewarm(320, 2) == 2
        assert platform.warm_instances() == {320: 2}
        running = platform.invoke(f"{FN}:pid", None, 320)
        assert platform.warm_instances() == {320: 1}  # one of them took the invocation
        running.result(timeout=60)
        platform.invoke(f"{FN}:pid", None, 384).result(timeout=60)  # a cold one, idle after
        assert platform.warm_instances() == {320: 2, 384: 1}
        # Sizes come idle-longest first (the order this platform stops them to make room).
        assert list(platform.warm_instances()) == [320, 384]
        platform.invoke(f"{FN}:pid", None, 320).result(timeout=60)
        assert list(platform.warm_instances()) == [384, 320]


def test_a_timeout_is_billed_up_to_its_limit_exactly() -> None:
    """As AWS Lambda bills a timed-out function: the kill and reaping after it are not billed."""
    with open_platform("local", load_catalog("local"), cpu="none") as platform:
        invocation = platform.invoke("faasml.testing.functions:sleep", 30.0, 256, timeout_s=1.0)
        with pytest.raises(FunctionError, match="timeout"):
            invocation.result(timeout=60)
    assert invocation.billed is not None
    assert invocation.billed.duration_s == pytest.approx(1.0, abs=1e-9)


def _reapable(pid: int) -> bool:
    """The process has ended (a zombie with no thread left, or reaped): waitpid would reap it
    and its end of the pipe is closed."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state in ("Z", "X") and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:  # reaped, or being reaped while we read (ESRCH)
        return True


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_an_instance_that_died_while_idle_is_not_given_work() -> None:
    """A warm instance can die between two invocations (before the platform's monitor has
    seen it go): the next invocation runs on a fresh instance instead of failing with a
    broken pipe (issue 12: it once escaped the coordinator as `function killed`)."""
    with open_platform("local", load_catalog("local"), cpu="none") as platform:
        for _ in range(12):
            pid = platform.invoke(f"{FN}:pid", None, 256).result(timeout=60)
            os.kill(pid, signal.SIGKILL)  # the instance dies while idle
            deadline = time.monotonic() + 30
            while not _reapable(pid) and time.monotonic() < deadline:
                time.sleep(0.0002)
            call = platform.invoke(f"{FN}:echo", 7, 256)
            assert call.result(timeout=60) == 7
            assert call.billed is not None and call.billed.cold  # not the dead one


_KILLED_PLATFORM = """
import os, signal, sys
from faasml.catalog import load_catalog
from faasml.runtime.platforms.contract import open_platform
platform = open_platform("local", load_catalog("local"), cpu="none", start=sys.argv[1])
platform.invoke("faasml.testing.functions:echo", 1, 256)
template = platform._starts.template
# A forked instance has no pid yet: it is queued for the template, still importing.
print(platform._instances[0].pid or template.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # before its new instance has even started
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("start", ["process", "template"])
def test_instances_of_a_killed_platform_end_quietly(tmp_path: Path, start: str) -> None:
    """A platform's process killed while an instance (or the template it is forked from) is
    still starting (before it asked to die with it): the orphan ends on its own and prints
    nothing on the terminal it inherited (issue 12: it printed a BrokenPipeError traceback)."""
    err_path = tmp_path / "stderr"
    with err_path.open("wb") as err:
        done = subprocess.run(
            [sys.executable, "-c", _KILLED_PLATFORM, start],
            stdout=subprocess.PIPE,
            stderr=err,
            timeout=120,
            check=False,
        )
    assert done.returncode == -signal.SIGKILL
    pid = int(done.stdout.split()[0])
    assert pid > 0
    deadline = time.monotonic() + 60
    while not _reapable(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _reapable(pid), "the orphaned instance is still running"
    assert err_path.read_text() == ""


def test_an_invocation_of_a_starting_function_does_not_wait_for_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The function's start holds until the gate file exists, which the test writes only once
    # invoke has returned: an invoke that waited for the start (its payload over the pipe's
    # buffer) would return after the gate gave up, and the function would say so.
    # New processes: from a template, the gate would hold the template's own start, which
    # every invoke awaits by design (the platform's start-up, not a function's).
    gate = tmp_path / "gate"
    monkeypatch.setenv("FAASML_TEST_GATE", str(gate))
    payload = b"x" * (8 * 2**20)
    with open_platform(
        "local",
        load_catalog("local"),
        cpu="none",
        preload=("faasml.testing.gate",),
        start="process",
    ) as platform:
        invocation = platform.invoke("faasml.testing.gate:opened_by", payload, 512)
        gate.touch()
        assert invocation.result(timeout=120) == ("file", len(payload))
        assert invocation.billed is not None and invocation.billed.cold
        assert platform.cold_starts == 1
