"""The local platform's template: a process that has imported the function runtime once and
forks each new instance from itself, as snapshot-based FaaS (Lambda SnapStart, Firecracker
snapshots) starts a sandbox from an initialised image instead of a fresh runtime.

Started by ``_starts.Starter`` as
``python -m faasml.runtime.platforms._template FD PRELOAD PARENT_PID`` with one thread per
library (so no library starts a thread pool at import: forking a process with other threads
is unsafe). Protocol over the SOCK_SEQPACKET socket FD (pickled tuples, one per packet):
first ``("ready", pid)`` or ``("unusable", reason)`` (and the template exits); then for each
``("fork", memory_mb, threads, env_set, env_unset, cwd)`` that carries two fds (the instance's
connection, and a pipe's read end the platform closes once it knows the child's pid), one
``("forked", pid)`` or ``("failed", reason)``; and ``("exit", pid, status)`` as each child
ends (status as ``Popen.returncode`` gives it). The template ends when the socket closes.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import select
import signal
import socket
import sys
import threading
from typing import Any

from faasml.runtime.platforms import _host

EXTRA_MODULES = ("threadpoolctl",)
"""Imported when installed: it sets a forked child's BLAS threads (read at import here)."""


def _threads() -> int:
    """Threads of this process as the kernel sees them (Python's count misses C threads)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - no /proc: cannot tell, so do not fork
        return 0


def unusable_reason(preload: list[str]) -> str | None:
    """Import the runtime; why this process cannot be forked from, or None when it can."""
    for name in ["numpy", *preload]:
        try:
            importlib.import_module(name)
        except BaseException as err:  # a module's own failure is the reason, not a crash
            return f"importing {name} failed: {type(err).__name__}: {err}"
    for name in EXTRA_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    python, kernel = threading.active_count(), _threads()
    if python != 1 or kernel != 1:
        return (
            f"the template has {kernel} threads ({python} Python threads) after importing "
            f"{', '.join(['numpy', *preload])}: a process with threads cannot be forked safely"
        )
    return None


def _send(sock: socket.socket, message: tuple[Any, ...]) -> None:
    sock.send(pickle.dumps(message))


def main(argv: list[str]) -> int:
    # As an instance: a Ctrl-C is for the platform's process, which then stops this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[0]))
    preload = [name for name in argv[1].split(",") if name]
    if not _host._die_with_parent(int(argv[2])):
        return 0  # the platform is gone
    try:
        reason = unusable_reason(preload)
        if reason is not None:
            _send(sock, ("unusable", reason))
            return 0
        _send(sock, ("ready", os.getpid()))
        _serve(sock, preload)
    except OSError:
        pass  # the platform closed the socket or died: nothing left to serve
    return 0


def _serve(sock: socket.socket, preload: list[str]) -> None:
    """Fork an instance per request, and report each child's end, until the socket closes."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
            _reap(sock)
        if sock.fileno() in readable:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
            if not data:
                return
            _fork(sock, pickle.loads(data), fds, preload, (wake_r, wake_w))


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, ("exit", pid, os.waitstatus_to_exitcode(status)))


def _fork(
    sock: socket.socket,
    request: tuple[Any, ...],
    fds: list[int],
    preload: list[str],
    wake: tuple[int, int],
) -> None:
    template = os.getpid()
    try:
        pid = os.fork()
    except OSError as err:
        for fd in fds:
            os.close(fd)
        _send(sock, ("failed", f"fork failed: {err}"))
        return
    if pid == 0:
        _child(sock, request, fds, preload, (template, *wake))
    for fd in fds:
        os.close(fd)
    _send(sock, ("forked", pid))


def _child(
    sock: socket.socket,
    request: tuple[Any, ...],
    fds: list[int],
    preload: list[str],
    fork: tuple[int, int, int],
) -> None:
    """The forked instance: never returns into the template's loop. ``fork``: the template's
    pid and its wake-up pipe's fds."""
    status = 1
    template, *wake = fork
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wake:
            os.close(fd)
        _, memory_mb, threads, env_set, env_unset, cwd = request
        conn_fd, release_fd = fds
        if not _host._die_with_parent(template):
            status = 0  # the template (and so the platform) is gone
            return
        os.read(release_fd, 1)  # until the platform has recorded this pid
        os.close(release_fd)
        for name in env_unset:
            os.environ.pop(name, None)
        os.environ.update(env_set)
        _as_started_now(cwd)
        _as_a_fresh_process(int(threads))
        status = _host.serve_fd(conn_fd, int(memory_mb), preload)
    except BaseException:  # an instance that cannot start reports it by its exit status
        status = 1
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # as a process's own exit runs them (``_as_a_fresh_process``)
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def _as_started_now(cwd: str) -> None:
    """What a process started now would see that the template read at its own start: the
    platform's working directory and ``PYTHONPATH`` entries added since (first on the path,
    as Python puts them)."""
    os.chdir(cwd)
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    for entry in reversed(entries):
        if entry not in sys.path:
            sys.path.insert(0, entry)


def _as_a_fresh_process(threads: int) -> None:
    """What a fresh process would have read at import: the thread counts (the template
    imported the libraries with one thread each) and a seed of numpy's global generator of
    its own (Python's ``random`` reseeds itself in a forked child; numpy does not). The exit
    handlers the template's imports registered are dropped (one could remove what the
    template made, shared by its children), the logging flush kept, so that at its exit the
    child runs that and the handlers its functions register."""
    atexit._clear()
    logging = sys.modules.get("logging")
    if logging is not None:
        atexit.register(logging.shutdown)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    threadpoolctl = sys.modules.get("threadpoolctl")
    if threadpoolctl is not None:
        threadpoolctl.threadpool_limits(threads)
    numpy_random = sys.modules.get("numpy.random")  # when imported: numpy imports it lazily
    if numpy_random is not None:
        numpy_random.seed()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
