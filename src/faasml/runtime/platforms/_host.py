"""One function instance of the local platform: a process that runs invocations one at a time.

Started by ``LocalPlatform`` as
``python -m faasml.runtime.platforms._host FD MEMORY_MB PRELOAD PARENT_PID``.
Only the standard library is imported before the thread limits are in the environment, so
numpy and torch see them. Protocol over the connection (pickled tuples):
``("ready", t)`` once; then for each ``("run", ref, payload)`` one ``("ok", value, t0, t1)`` or
``("err", kind, message, traceback)``; ``None`` asks the instance to exit.

An instance never outlives the platform's process: it is killed when that process dies, and
one whose platform died while it was starting (before it could ask for that) or whose
connection breaks exits at once and quietly (status 0), printing nothing.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

EXIT_AFTER = ("out-of-memory",)


def _vm_size_bytes() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - non-Linux
        return 0


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - non-Linux
        return 0


def _limit_address_space(memory_mb: int, held_bytes: int = 0) -> None:
    """RLIMIT_AS = the runtime's address space after start-up + the function's memory, less
    ``held_bytes`` already counted against it: an allocation past the function's size fails
    with MemoryError, as a function runs out."""
    try:
        import resource
    except ImportError:  # pragma: no cover - non-POSIX
        return
    limit = _vm_size_bytes() + max(memory_mb * 2**20 - held_bytes, 0)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _out_of_address_space(err: BaseException) -> bool:
    """A library that could not be mapped under RLIMIT_AS (e.g. a large framework)."""
    text = str(err)
    return "failed to map segment" in text or "Cannot allocate memory" in text


def _out_of_memory(err: BaseException) -> bool:
    """The function ran out of its memory: Python's MemoryError, a library that could not be
    mapped, or a framework's own allocation failure (torch raises RuntimeError or its
    OutOfMemoryError, not MemoryError, when its allocator gets no memory)."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    if isinstance(err, ImportError | OSError):
        return _out_of_address_space(err)
    return isinstance(err, RuntimeError) and "can't allocate memory" in str(err)


def _run(ref: str, payload: Any) -> Any:
    module_name, _, attribute = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target(payload)


def _die_with_parent(parent_pid: int) -> bool:
    """Linux: be killed when the platform's process dies (no orphaned functions). False when
    it has died already: the signal is only sent for a death after the request, and this
    process imported faasml (hundreds of ms) before it could make it."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    return parent_pid <= 0 or os.getppid() == parent_pid


def main(argv: list[str]) -> int:
    # A Ctrl-C on the terminal reaches every process of its group: it is the platform's
    # process that stops the run (and then this instance), not a traceback printed here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent_pid = int(argv[3]) if len(argv) > 3 else 0
    if not _die_with_parent(parent_pid):
        return 0  # the platform is gone: nobody to serve, nothing to say
    preload = [name for name in (argv[2] if len(argv) > 2 else "").split(",") if name]
    return serve_fd(int(argv[0]), int(argv[1]), preload)


def serve_fd(fd: int, memory_mb: int, preload: list[str]) -> int:
    """Serve invocations on the connection ``fd`` until told to stop; the exit status.
    (Also the entry of an instance forked from the platform's template, ``_template``.)"""
    conn = Connection(fd)
    try:
        return _serve(conn, memory_mb, preload)
    except (EOFError, ConnectionError):
        # The connection broke: the platform's process died (or closed it). An orphan has no
        # one to report to, so it ends quietly rather than print a traceback on the terminal
        # it inherited.
        return 0


def _serve(conn: Connection, memory_mb: int, preload: list[str]) -> int:
    for name in ["numpy", *preload]:
        importlib.import_module(name)
    if os.environ.get("FAASML_RLIMIT_AS", "1") == "1":
        _limit_address_space(memory_mb)
    conn.send(("ready", time.monotonic()))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return 0
        if message is None:
            return 0
        _, ref, payload = message
        start = time.monotonic()
        try:
            value = _run(ref, payload)
        except MemoryError:
            conn.send(("err", "out-of-memory", f"over {memory_mb} MB", traceback.format_exc()))
            return 1
        except Exception as err:
            if not _out_of_memory(err):
                conn.send(("err", "error", f"{type(err).__name__}: {err}", traceback.format_exc()))
                continue
            message = f"over {memory_mb} MB: {type(err).__name__}: {err}"
            conn.send(("err", "out-of-memory", message, traceback.format_exc()))
            return 1
        except BaseException as err:  # the function's failure goes back to the caller
            conn.send(("err", "error", f"{type(err).__name__}: {err}", traceback.format_exc()))
            if isinstance(err, KeyboardInterrupt | SystemExit):
                return 1
            continue
        try:
            conn.send(("ok", value, start, time.monotonic()))
        except Exception as err:  # an unpicklable result
            conn.send(("err", "error", f"result cannot be sent: {err}", traceback.format_exc()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
