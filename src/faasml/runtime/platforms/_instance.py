"""A local function instance (a process serving ``_host``'s loop) and an invocation on one: the
local platform's pieces (``local.LocalPlatform`` runs them)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

from faasml.runtime.platforms import _common
from faasml.runtime.platforms._cpu import DutyCycle


class LocalInvocation(_common.SettledInvocation):
    """An invocation on one local instance; completed by the platform's monitor thread."""

    def __init__(self, memory_mb: int, dispatched: float, deadline: float, cold: bool) -> None:
        super().__init__(memory_mb, dispatched)
        self.deadline = deadline
        self.cold = cold
        self.init_s = 0.0
        self._cancel: threading.Event = threading.Event()

    def cancel(self) -> None:
        if not self._event.is_set():
            self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()


class ProcessHandle(Protocol):
    """An instance's process however it was started: ``subprocess.Popen`` (a new process) or
    ``_starts.ForkedProcess`` (forked from the template; its ``pid`` is 0 until forked)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass(eq=False)
class Instance:
    """One function instance: its process, the pipe to it, and what it is doing."""

    memory_mb: int
    vcpus: float
    process: ProcessHandle
    conn: Connection
    spawned: float
    ready_at: float | None = None
    invocation: LocalInvocation | None = None
    idle_since: float = 0.0
    prewarmed: bool = False
    throttle: DutyCycle | None = None
    cgroup: Path | None = None
    pending: list[Any] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0
