"""CPU share of a local function: a cgroup CPU quota when writable, else a duty-cycle throttle.

vCPU = memory / mb_per_vcpu (1769 MB per vCPU, as AWS Lambda). A cgroup quota is exact and
costs nothing; the duty-cycle throttle (the parent stops and continues the process with
SIGSTOP / SIGCONT within each period) is portable but coarse; where neither is possible the
share is reported as not enforced.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

PERIOD_S = 0.1
"""Throttle and cgroup period."""

CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
CGROUP_V2_ROOT = Path("/sys/fs/cgroup")


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


class CgroupCpu:
    """A parent cgroup for this platform with one child group per function instance."""

    def __init__(self, root: Path, version: int) -> None:
        self.version = version
        self.root = root / f"faasml-{os.getpid()}"
        _remove_stale(root)
        self.root.mkdir(exist_ok=True)

    @staticmethod
    def probe() -> CgroupCpu | None:
        """A usable cgroup hierarchy with a writable CPU controller, or None."""
        candidates: list[tuple[Path, int]] = []
        if (CGROUP_V1_CPU / "cpu.cfs_quota_us").exists() and _writable_dir(CGROUP_V1_CPU):
            candidates.append((CGROUP_V1_CPU, 1))
        controllers = CGROUP_V2_ROOT / "cgroup.controllers"
        v2_cpu = controllers.exists() and "cpu" in controllers.read_text().split()
        if v2_cpu and _writable_dir(CGROUP_V2_ROOT):
            candidates.append((CGROUP_V2_ROOT, 2))
        for root, version in candidates:
            try:
                group = CgroupCpu(root, version)
                if version == 2:
                    subtree = group.root / "cgroup.subtree_control"
                    with contextlib.suppress(OSError):
                        (root / "cgroup.subtree_control").write_text("+cpu")
                    subtree.write_text("+cpu")
                return group
            except OSError:
                continue
        return None

    def attach(self, pid: int, vcpus: float) -> Path:
        """Put ``pid`` in its own group with a quota of ``vcpus`` CPUs."""
        group = self.root / f"fn-{pid}"
        group.mkdir(exist_ok=True)
        period_us = int(PERIOD_S * 1_000_000)
        quota_us = max(1000, int(vcpus * period_us))
        if self.version == 1:
            (group / "cpu.cfs_period_us").write_text(str(period_us))
            (group / "cpu.cfs_quota_us").write_text(str(quota_us))
            (group / "cgroup.procs").write_text(str(pid))
        else:
            (group / "cpu.max").write_text(f"{quota_us} {period_us}")
            (group / "cgroup.procs").write_text(str(pid))
        return group

    @staticmethod
    def detach(group: Path) -> None:
        """Remove a group whose process has exited."""
        with contextlib.suppress(OSError):
            group.rmdir()

    def close(self) -> None:
        if self.root.exists():
            for child in self.root.iterdir():
                if child.is_dir():
                    self.detach(child)
            with contextlib.suppress(OSError):
                self.root.rmdir()


def _remove_stale(root: Path) -> None:
    """Remove the empty groups of platforms whose process died without closing."""
    for group in root.glob("faasml-*"):
        try:
            pid = int(group.name.split("-", 1)[1])
            os.kill(pid, 0)
        except ProcessLookupError:
            for child in group.iterdir():
                if child.is_dir():
                    CgroupCpu.detach(child)
            with contextlib.suppress(OSError):
                group.rmdir()
        except (ValueError, PermissionError, OSError):
            continue


class DutyCycle:
    """Runs a process for ``vcpus × PERIOD_S`` of every period and stops it for the rest."""

    def __init__(self, pid: int, vcpus: float, start: float) -> None:
        self.pid = pid
        self.share = min(1.0, vcpus)
        self.origin = start
        self.stopped = False

    def tick(self, now: float) -> float:
        """Apply the phase at ``now``; returns the next time the phase changes."""
        if self.share >= 1.0:
            return now + PERIOD_S
        phase = (now - self.origin) % PERIOD_S
        run_for = self.share * PERIOD_S
        should_stop = phase >= run_for
        if should_stop != self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGSTOP if should_stop else signal.SIGCONT)
            self.stopped = should_stop
        boundary = run_for if not should_stop else PERIOD_S
        return now + (boundary - phase)

    def release(self) -> None:
        if self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
            self.stopped = False
