"""faasml's own parameter server: a process reached over TCP that stores values and averages.

The VM parameter server of CE-scaling (Fig. 5, eq. 3: 2n − 2 transfers, billed by the hour) and
SMLT's parameter store. It is a key-value store (``ps://host:port``, usable by any scheme) that
can also *compute*: ``reduce`` takes one worker's gradient and answers the mean once all n
arrived, so each worker moves its model twice per round instead of the 3n − 2 transfers of a
stateless store.

Start and stop one from Python::

    with ParameterServer() as server:          # a child process on 127.0.0.1, free port
        store = open_store(server.url)          # "ps://127.0.0.1:PORT"

or from a shell: ``python -m faasml.sync.param_server --host 127.0.0.1 --port 7000``.

Wire format (both directions little-endian): a request is ``op`` (1 byte), header length
(4 bytes), a JSON header, payload length (8 bytes), payload; a reply is a status byte, header
length, JSON header, payload length, payload.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import ConfigError, StoreUnavailableError
from faasml.sync._process import die_with_parent
from faasml.sync.schemes._base import decode, encode, mean_of
from faasml.sync.stores._base import Store

OP_PING, OP_PUT, OP_GET, OP_DELETE, OP_REDUCE = 1, 2, 3, 4, 5
OK, MISSING, TIMEOUT, ERROR = 0, 1, 2, 3
_HEAD = struct.Struct("<BI")
_LEN = struct.Struct("<Q")


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise ConnectionError("connection closed by peer")
        got += n
    return bytes(buf)


def _send_frame(sock: socket.socket, code: int, header: dict[str, Any], payload: bytes) -> None:
    head = json.dumps(header).encode()
    sock.sendall(_HEAD.pack(code, len(head)) + head + _LEN.pack(len(payload)))
    if payload:
        sock.sendall(payload)


def _recv_frame(sock: socket.socket) -> tuple[int, dict[str, Any], bytes]:
    code, head_len = _HEAD.unpack(_recv_exact(sock, _HEAD.size))
    header = json.loads(_recv_exact(sock, head_len)) if head_len else {}
    (payload_len,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    payload = _recv_exact(sock, payload_len) if payload_len else b""
    return code, header, payload


@dataclass
class _Round:
    """One reduce round on the server: gradients by worker, then the mean for everyone."""

    n: int
    gradients: dict[int, NDArray[np.float32]] = field(default_factory=dict)
    mean: bytes | None = None
    served: set[int] = field(default_factory=set)


class _State:
    """Everything the server holds; one lock, one condition for reduce rounds."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.rounds: dict[str, _Round] = {}
        self.cond = threading.Condition()

    def delete_prefix(self, prefix: str) -> int:
        with self.cond:
            keys = [k for k in self.values if k.startswith(prefix)]
            for k in keys:
                del self.values[k]
            for k in [k for k in self.rounds if k.startswith(prefix)]:
                del self.rounds[k]
            return len(keys)

    def reduce(
        self, key: str, worker: int, n: int, gradient: NDArray[np.float32], timeout_s: float
    ) -> bytes | None:
        """The round's mean once all n workers handed in (worker order sums); None on timeout."""
        with self.cond:
            state = self.rounds.setdefault(key, _Round(n))
            if state.n != n:
                raise ValueError(f"round {key!r} has {state.n} workers, this call says {n}")
            if state.mean is None:
                state.gradients[worker] = gradient
                if len(state.gradients) == n:
                    state.mean = encode(mean_of([state.gradients[w] for w in range(n)]))
                    state.gradients.clear()
                    self.cond.notify_all()
            if not self.cond.wait_for(lambda: state.mean is not None, timeout_s):
                return None
            state.served.add(worker)
            if len(state.served) == n and self.rounds.get(key) is state:
                del self.rounds[key]
            return state.mean


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = self.server.state
        while True:
            try:
                op, header, payload = _recv_frame(sock)
            except (ConnectionError, OSError):
                return
            try:
                code, reply_header, reply = self._serve(state, op, header, payload)
            except (ValueError, KeyError, TypeError) as err:
                code, reply_header, reply = ERROR, {"error": str(err)}, b""
            try:
                _send_frame(sock, code, reply_header, reply)
            except OSError:
                return

    @staticmethod
    def _serve(
        state: _State, op: int, header: dict[str, Any], payload: bytes
    ) -> tuple[int, dict[str, Any], bytes]:
        if op == OP_PING:
            return OK, {}, b""
        if op == OP_PUT:
            with state.cond:
                state.values[header["key"]] = payload
            return OK, {}, b""
        if op == OP_GET:
            with state.cond:
                value = state.values.get(header["key"])
            return (MISSING, {}, b"") if value is None else (OK, {}, value)
        if op == OP_DELETE:
            return OK, {"removed": state.delete_prefix(header["prefix"])}, b""
        if op == OP_REDUCE:
            mean = state.reduce(
                header["key"],
                int(header["worker"]),
                int(header["n"]),
                decode(payload),
                float(header["timeout_s"]),
            )
            return (TIMEOUT, {}, b"") if mean is None else (OK, {}, mean)
        raise ValueError(f"unknown operation {op}")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int]) -> None:
        self.state = _State()
        super().__init__(address, _Handler)


def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    """Run a parameter server in this process until interrupted; prints its address first."""
    with _Server((host, port)) as server:
        bound_port = server.server_address[1]
        print(f"faasml-ps listening {host} {bound_port}", flush=True)
        server.serve_forever()


class ParameterServer:
    """A parameter-server child process on ``host`` (loopback by default) and a free port."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 30.0):
        self.host = host
        self.port = port
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._started_at: float | None = None

    @property
    def url(self) -> str:
        return f"ps://{self.host}:{self.port}"

    @property
    def uptime_s(self) -> float:
        """Seconds since start: what a VM parameter server is billed for."""
        return 0.0 if self._started_at is None else time.monotonic() - self._started_at

    def start(self) -> Self:
        cmd = [sys.executable, "-m", "faasml.sync.param_server"]
        cmd += ["--host", self.host, "--port", str(self.port)]
        self._process = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent
        )
        stdout = self._process.stdout
        ready = stdout is not None and select.select([stdout], [], [], self.start_timeout_s)[0]
        line = stdout.readline().split() if stdout is not None and ready else []
        if len(line) != 4 or line[:2] != ["faasml-ps", "listening"]:
            self.stop()
            raise StoreUnavailableError(
                f"parameter server on {self.host}:{self.port} did not start (said {line!r})"
            )
        self.port = int(line[3])
        self._started_at = time.monotonic()
        return self

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ParameterServerStore(Store):
    """Client of a parameter server (``ps://host:port``); also the ``param-server`` scheme's."""

    max_poll_s = 0.005
    retries = 4

    def __init__(self, url: str, host: str, port: int, connect_timeout_s: float = 5.0) -> None:
        super().__init__(url)
        self.host = host
        self.port = port
        self.connect_timeout_s = connect_timeout_s
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str) -> Self:
        parts = urlsplit(url)
        if parts.scheme not in ("ps", "vm-ps") or not parts.hostname or parts.port is None:
            raise ConfigError(f"parameter-server URL {url!r} must look like ps://host:port")
        return cls(url, parts.hostname, parts.port)

    def _connect(self) -> socket.socket:
        delay = 0.05
        for attempt in range(self.retries + 1):
            try:
                sock = socket.create_connection(
                    (self.host, self.port), timeout=self.connect_timeout_s
                )
            except OSError as err:
                if attempt == self.retries:
                    raise StoreUnavailableError(
                        f"parameter server at {self.host}:{self.port} cannot be reached "
                        f"after {self.retries + 1} attempts: {err}"
                    ) from err
                time.sleep(delay)
                delay *= 2
            else:
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
        raise AssertionError("unreachable")

    def _call(
        self, op: int, header: dict[str, Any], payload: bytes = b""
    ) -> tuple[int, dict[str, Any], bytes]:
        """One request and its reply; a broken connection is reopened and the request retried
        (every operation is idempotent: puts overwrite, a reduce is keyed by worker)."""
        with self._lock:
            for attempt in range(2):
                if self._sock is None:
                    self._sock = self._connect()
                try:
                    _send_frame(self._sock, op, header, payload)
                    code, reply_header, reply = _recv_frame(self._sock)
                except (ConnectionError, OSError) as err:
                    self._sock.close()
                    self._sock = None
                    if attempt == 1:
                        raise StoreUnavailableError(
                            f"parameter server at {self.host}:{self.port} dropped the "
                            f"connection: {err}"
                        ) from err
                    continue
                if code == ERROR:
                    raise ConfigError(
                        f"parameter server at {self.host}:{self.port} refused the request: "
                        f"{reply_header.get('error')}"
                    )
                return code, reply_header, reply
        raise AssertionError("unreachable")

    def ping(self) -> None:
        """Raise StoreUnavailableError unless the server answers."""
        self._call(OP_PING, {})

    def _put(self, key: str, value: bytes) -> None:
        self._call(OP_PUT, {"key": key}, value)

    def _get(self, key: str) -> bytes | None:
        code, _, value = self._call(OP_GET, {"key": key})
        return None if code == MISSING else value

    def _delete_prefix(self, prefix: str) -> int:
        _, header, _ = self._call(OP_DELETE, {"prefix": prefix})
        return int(header["removed"])

    def reduce_mean(
        self,
        key: str,
        worker_id: int,
        n_workers: int,
        gradient: NDArray[np.float32],
        timeout_s: float,
    ) -> NDArray[np.float32]:
        """Hand in one gradient of round ``key``; the mean of all n once every worker has
        (the server computes it). Counted as one PUT and one GET with their bytes."""
        payload = encode(gradient)
        header = {"key": key, "worker": worker_id, "n": n_workers, "timeout_s": timeout_s}
        code, _, mean = self._call(OP_REDUCE, header, payload)
        self._count_extra(puts=1, gets=1, bytes_written=len(payload), bytes_read=len(mean))
        if code == TIMEOUT:
            raise TimeoutError(
                f"{self.url}: round {key!r} did not get all {n_workers} workers "
                f"within {timeout_s:g} s"
            )
        return decode(mean)

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m faasml.sync.param_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one, printed)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        serve(args.host, args.port)


if __name__ == "__main__":
    main()
