"""Faults injected into a worker (tests and the fault benchmark): the worker's process is
killed, or stopped, at a chosen round, as a function's instance can die or hang, or it starts
late, as a cold start on a busy machine does.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Fault:
    """A fault to inject (tests and the fault benchmark): the worker's process is killed with
    SIGKILL at ``round_id``, during computation or during synchronisation."""

    worker_id: int
    round_id: int
    during: str = "compute"
    """'compute' (before the gradient), 'sync' (inside the scheme's reduce), 'hang', or
    'late-start' (the worker starts ``delay_s`` late, before loading; ``round_id`` unused)."""
    delay_s: float = 0.0
    """How late a 'late-start' worker starts."""


def start_late(fault: Fault | None, worker_id: int) -> None:
    """Apply an injected 'late-start' fault: the worker sleeps before it loads anything (and
    before its heartbeat), as a slow cold start would keep it."""
    if fault is not None and fault.during == "late-start" and fault.worker_id == worker_id:
        time.sleep(fault.delay_s)


def inject_fault(fault: Fault | None, worker_id: int, round_id: int) -> bool:
    """Apply an injected fault: SIGKILL now ('compute'), SIGKILL 2 ms into the coming reduce
    ('sync'; True: the caller waits for it once the reduce returns, so that a reduce faster
    than 2 ms cannot let the worker finish its segment first), or SIGSTOP, a worker that
    hangs and falls silent ('hang')."""
    if fault is None or fault.worker_id != worker_id or fault.round_id != round_id:
        return False
    if fault.during == "late-start":
        return False  # applied at the start (``start_late``)
    if fault.during == "sync":
        _kill_self_later(0.002)
        return True
    if fault.during == "hang":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        os.kill(os.getpid(), signal.SIGKILL)
    return False


def _kill_self_later(delay_s: float) -> None:
    timer = threading.Timer(delay_s, lambda: os.kill(os.getpid(), signal.SIGKILL))
    timer.daemon = True
    timer.start()
