"""How the local platform starts an instance's process: forked from the platform's template
(``_template``, which has imported the runtime once) or as a new Python process (``_host``).
Both give a ``ProcessHandle`` (``_instance``), so the platform does not care which it got.

A start never fails because of the template: a template that cannot be used (an import
failed, or it has threads) or that ended makes this starter start processes from then on,
with the reason kept in ``Starter.fallback``; the instances waiting for it start as processes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping

from faasml.runtime.platforms._instance import ProcessHandle

START_MODES = ("template", "process")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
"""The template's libraries start no thread pool at import; a child sets its own counts."""
READY_TIMEOUT_S = 300.0
"""Longest a start waits for the template to import the runtime before starting processes."""

log = logging.getLogger(__name__)


def start_process(
    child_fd: int, memory_mb: int, preload: tuple[str, ...], env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """A new Python process serving the connection ``child_fd`` (``_host``)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "faasml.runtime.platforms._host",
            str(child_fd),
            str(memory_mb),
            ",".join(preload),
            str(os.getpid()),
        ],
        pass_fds=(child_fd,),
        env=dict(env),
        stdin=subprocess.DEVNULL,
    )


class ForkedProcess:
    """An instance's process forked by the template, or queued for it: ``pid`` is 0 until the
    template has forked it. Its exit status comes from the template, which is its parent. If
    the template cannot fork it, it starts as a new process (``fall_back``) and this handle
    stands for that process."""

    def __init__(
        self, child_fd: int, release_fd: int, fallback: Callable[[], subprocess.Popen[bytes]]
    ):
        self._lock = threading.Lock()
        self._pid = 0
        self._pidfd = -1
        self._code: int | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._settled = threading.Event()  # ended, or now a new process
        self._killed = False
        self._fds = [child_fd, release_fd]  # held until forked (or started as a process)
        self._fallback = fallback

    @property
    def pid(self) -> int:
        popen = self._popen
        return popen.pid if popen is not None else self._pid

    def poll(self) -> int | None:
        popen = self._popen
        return popen.poll() if popen is not None else self._code

    def kill(self) -> None:
        with self._lock:
            self._killed = True
            if self._popen is not None:
                self._popen.kill()
            elif self._code is None and self._pid:
                self._signal_kill()
            elif not self._pid:  # still queued: it will never run (``forked``, ``fall_back``)
                self._code = -signal.SIGKILL
                self._settled.set()

    def wait(self, timeout: float | None = None) -> int:
        if not self._settled.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked instance {self._pid}", timeout or 0.0)
        popen = self._popen
        if popen is not None:
            return popen.wait(timeout)
        assert self._code is not None
        return self._code

    # ---------------------------------------------------------------- the starter's calls

    def forked(self, pid: int) -> None:
        """The template forked it: record the pid, then let the child go on (it waits for
        its release fd to close), so the platform knows its pid before it is ready."""
        with self._lock:
            self._pid = pid
            with contextlib.suppress(OSError, AttributeError):  # gone already, or no pidfd
                self._pidfd = os.pidfd_open(pid)
            self._release()
            if self._killed:
                self._signal_kill()

    def exited(self, code: int) -> None:
        with self._lock:
            self._code = code
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1
            self._settled.set()

    def fall_back(self) -> None:
        """Start it as a new process instead (the template cannot fork it)."""
        with self._lock:
            if self._killed:
                self._code = -signal.SIGKILL
            else:
                try:
                    self._popen = self._fallback()
                except OSError as err:
                    log.warning("an instance could not be started: %s", err)
                    self._code = 1
            self._release()
            self._settled.set()

    def _release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def _signal_kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self._pidfd >= 0:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(self._pid, signal.SIGKILL)


def template_unavailable() -> str | None:
    """Why this system cannot fork instances from a template (None when it can)."""
    if not sys.platform.startswith("linux"):
        return f"starting from a template needs Linux (this is {sys.platform})"
    if not hasattr(socket, "send_fds") or not hasattr(os, "fork"):
        return "starting from a template needs socket.send_fds and os.fork"
    return None


class Starter:
    """Starts the local platform's instances: through its template (started at the first
    start, on a thread of its own that lives as long as the platform, since a process asked
    to die with its parent dies with the thread that started it), or as new processes."""

    def __init__(self, mode: str, preload: tuple[str, ...]) -> None:
        self.preload = preload
        self._asked = mode
        self.fallback: str | None = None
        """Why instances start as processes although the template was asked for."""
        if mode == "template":
            self._fall_back_for_good(template_unavailable())
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._template_env: dict[str, str] = {}
        self._queue: deque[ForkedProcess] = deque()
        self._children: dict[int, ForkedProcess] = {}
        self._closed = threading.Event()
        self._ready = threading.Event()  # the template can fork, or has been given up
        self._thread: threading.Thread | None = None
        self.template: subprocess.Popen[bytes] | None = None

    @property
    def mode(self) -> str:
        """How the next instance starts: ``template`` or ``process``."""
        return "template" if self._asked == "template" and self.fallback is None else "process"

    def start(self, memory_mb: int, env: Mapping[str, str], child_fd: int) -> ProcessHandle:
        """The process (a ``ProcessHandle``) of a new instance serving ``child_fd``; the
        caller closes its ``child_fd`` afterwards."""
        with self._lock:
            if self.mode == "template" and not self._closed.is_set():
                try:
                    return self._fork(memory_mb, env, child_fd)
                except OSError as err:
                    self._fall_back_for_good(f"the template could not be reached: {err}")
        return start_process(child_fd, memory_mb, self.preload, env)

    def ready(self, env: Callable[[], Mapping[str, str]]) -> None:
        """Start the template (with ``env()``, an instance's environment) if it is not
        started, and wait until it can fork instances or has been given up for processes.
        Called before every invocation: once ready, it only checks an event."""
        if self._ready.is_set():
            return
        with self._lock:
            if self.mode != "template" or self._closed.is_set():
                return
            if self._sock is None:
                self._launch(env())
        if not self._ready.wait(READY_TIMEOUT_S):
            with self._lock:
                self._fall_back_for_good(
                    f"the template did not import the runtime within {READY_TIMEOUT_S:g} s"
                )
                if self.template is not None:
                    self.template.kill()  # its queued instances then start as processes

    def close(self) -> None:
        """Stop the template (its instances were stopped before)."""
        with self._lock:
            self._closed.set()
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
            if self.template is not None:
                # Its instances were stopped; one still importing would end only after that.
                self.template.kill()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # ---------------------------------------------------------------- the template

    def _fork(self, memory_mb: int, env: Mapping[str, str], child_fd: int) -> ForkedProcess:
        if self._sock is None:
            self._launch(env)
        assert self._sock is not None
        threads = int(env.get("OMP_NUM_THREADS", "1"))
        base = self._template_env
        env_set = {k: v for k, v in env.items() if base.get(k) != v}
        env_unset = [k for k in base if k not in env]
        own_fd = os.dup(child_fd)
        release_r, release_w = os.pipe()
        preload, snapshot = self.preload, dict(env)
        handle = ForkedProcess(
            own_fd, release_w, lambda: start_process(own_fd, memory_mb, preload, snapshot)
        )
        request = pickle.dumps(("fork", memory_mb, threads, env_set, env_unset, os.getcwd()))
        try:
            socket.send_fds(self._sock, [request], [child_fd, release_r])
        except OSError:
            for fd in (own_fd, release_w):
                os.close(fd)
            raise
        finally:
            os.close(release_r)
        self._queue.append(handle)
        return handle

    def _launch(self, env: Mapping[str, str]) -> None:
        """Start the template's thread (lock held): it starts the template and reads it."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with contextlib.suppress(OSError):  # many starts queued behind its imports
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 2**20)
        self._sock = ours
        self._template_env = {**env, **ONE_THREAD, "MALLOC_ARENA_MAX": "2"}
        for name in ("FAASML_FUNCTION_MEMORY_MB", "FAASML_FUNCTION_VCPUS"):
            self._template_env.pop(name, None)
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(theirs, started), name="faasml-template", daemon=True
        )
        self._thread.start()
        started.wait()

    def _run(self, theirs: socket.socket, started: threading.Event) -> None:
        assert self._sock is not None
        command = [sys.executable, "-m", "faasml.runtime.platforms._template"]
        try:
            self.template = subprocess.Popen(
                [*command, str(theirs.fileno()), ",".join(self.preload), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                env=self._template_env,
                stdin=subprocess.DEVNULL,
            )
        except OSError as err:
            reason = f"the template could not start: {err}"
        finally:
            theirs.close()
            started.set()
        if self.template is not None:
            said = self._read()
            code = self.template.wait()
            reason = said or f"the template ended (exit status {code})"
        self._gone(reason)
        self._sock.close()
        # Processes this thread started (instances that fell back) die with it: it stays.
        self._closed.wait()

    def _read(self) -> str | None:
        """Read the template's messages until it ends; why it cannot be used, if it says."""
        assert self._sock is not None
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except ConnectionResetError:
                # It ended with requests unread: what it sent before is still to be read.
                continue
            except OSError:
                return None
            if not data:
                return None
            message = pickle.loads(data)
            tag = message[0]
            if tag == "ready":
                self._ready.set()
            elif tag == "unusable":
                return str(message[1])
            elif tag in ("forked", "failed"):
                with self._lock:
                    handle = self._queue.popleft()
                    if tag == "forked":
                        self._children[int(message[1])] = handle
                if tag == "forked":
                    handle.forked(int(message[1]))
                else:
                    log.debug("the template could not fork an instance: %s", message[1])
                    handle.fall_back()
            elif tag == "exit":
                with self._lock:
                    child = self._children.pop(int(message[1]), None)
                if child is not None:
                    child.exited(int(message[2]))

    def _gone(self, reason: str) -> None:
        """The template ended: start processes from now on, the queued instances too."""
        with self._lock:
            if not self._closed.is_set():
                self._fall_back_for_good(reason)
            queued, self._queue = list(self._queue), deque()
            children, self._children = list(self._children.values()), {}
            self._ready.set()
        for handle in queued:
            handle.fall_back()
        for child in children:
            child.exited(-signal.SIGKILL)  # a template's child dies with it (PDEATHSIG)

    def _fall_back_for_good(self, reason: str | None) -> None:
        if reason is not None and self.fallback is None:
            self.fallback = reason
            log.debug("local platform: instances start as new processes: %s", reason)
