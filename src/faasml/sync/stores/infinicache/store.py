"""The InfiniCache client library (§4.1.1): encode on PUT, decode the first d on GET.

``InfiniCacheStore.start(options, open_platform)`` starts a deployment owned by this store
(closed with it); its ``url`` (``infinicache://127.0.0.1:PORT``) lets other threads and
processes join it while it runs. ``open_store("infinicache://127.0.0.1:PORT")`` joins a
running one. Erasure coding happens here, in the client, as in the paper: the proxy
only places and streams chunks.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Self

from faasml.exceptions import ConfigError, StoreUnavailableError
from faasml.sync.param_server import _recv_frame, _send_frame
from faasml.sync.stores._base import Store
from faasml.sync.stores.infinicache import _codec
from faasml.sync.stores.infinicache._options import RUNTIME_MB, Options, parse_url
from faasml.sync.stores.infinicache._state import OpenPlatform
from faasml.sync.stores.infinicache.proxy import C_DEL, C_GET, C_INFO, C_PUT, ERROR, InfiniCache


class InfiniCacheStore(Store):
    """A client of an InfiniCache proxy; one connection per concurrent caller."""

    max_poll_s = 0.005

    def __init__(
        self, url: str, host: str, port: int, deployment: InfiniCache | None = None
    ) -> None:
        super().__init__(url)
        self.host, self.port = host, port
        self.deployment = deployment
        """The deployment this store started and closes, if any."""
        self._idle: list[socket.socket] = []
        self._pool_lock = threading.Lock()
        self._options: Options | None = None

    @classmethod
    def check_url(cls, url: str) -> None:
        parse_url(url)

    @classmethod
    def from_url(cls, url: str) -> Self:
        """Join the running deployment ``infinicache://host:port``; a URL without a host asks
        for a new deployment, which only a caller with a platform can start (``start``)."""
        host, port, _ = parse_url(url)
        if host is None or port is None:
            raise ConfigError(
                f"the store URL {url} asks for a new InfiniCache deployment, but opening a "
                "store starts none: start it with "
                "faasml.runtime.platforms.infinicache.start_infinicache "
                "(or InfiniCacheStore.start) and open its infinicache://host:port"
            )
        return cls(f"infinicache://{host}:{port}", host, port)

    @classmethod
    def start(cls, options: Options, open_platform: OpenPlatform) -> Self:
        """Start a deployment of ``options`` on the platforms ``open_platform`` opens
        (``faasml.runtime.platforms.contract.open_platform``); closing the store stops it."""
        deployment = InfiniCache(options, open_platform).start()
        return cls(deployment.url, deployment.host, deployment.port, deployment)

    @property
    def options(self) -> Options:
        """d, p and node memory of the deployment, as its proxy tells them."""
        if self._options is None:
            _, info, _ = self._call(C_INFO, {})
            self._options = Options(
                data=int(info["data"]),
                parity=int(info["parity"]),
                nodes=int(info["data"]) + int(info["parity"]),
                memory=int(info.get("memory", RUNTIME_MB + 1)),
            )
        return self._options

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=10)
        except OSError as err:
            raise StoreUnavailableError(
                f"infinicache proxy at {self.host}:{self.port} cannot be reached: {err}"
            ) from err
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _call(
        self, op: int, header: dict[str, Any], payload: bytes = b""
    ) -> tuple[int, dict[str, Any], bytes]:
        with self._pool_lock:
            sock = self._idle.pop() if self._idle else None
        if sock is None:
            sock = self._connect()
        try:
            _send_frame(sock, op, header, payload)
            code, reply, data = _recv_frame(sock)
        except (ConnectionError, OSError) as err:
            sock.close()
            raise StoreUnavailableError(
                f"infinicache proxy at {self.host}:{self.port} dropped the connection: {err}"
            ) from err
        with self._pool_lock:
            self._idle.append(sock)
        if code == ERROR:
            error = ConfigError if reply.get("kind") == "ConfigError" else StoreUnavailableError
            raise error(str(reply.get("error")))
        return code, reply, data

    def _put(self, key: str, value: bytes) -> None:
        options = self.options
        options.check_object(len(value))
        coded = _codec.encode(value, options.data, options.parity)
        header = {
            "key": key,
            "size": coded.size,
            "chunk_size": coded.chunk_size,
            "digest": coded.digest,
            "crcs": list(coded.crcs),
        }
        self._call(C_PUT, header, b"".join(coded.chunks))

    def _get(self, key: str) -> bytes | None:
        code, reply, data = self._call(C_GET, {"key": key})
        if code != 0:
            return None
        options, size = self.options, int(reply["chunk_size"])
        chunks = {
            int(index): data[n * size : (n + 1) * size] for n, index in enumerate(reply["indices"])
        }
        try:
            return _codec.decode(
                chunks, options.data, options.parity, int(reply["size"]), reply["digest"]
            )
        except _codec.CodingError:
            return None  # never wrong bytes: a chunk set that does not decode is a miss

    def _delete_prefix(self, prefix: str) -> int:
        _, reply, _ = self._call(C_DEL, {"prefix": prefix})
        return int(reply["removed"])

    def close(self) -> None:
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()
        if self.deployment is not None:
            self.deployment.close()
            self.deployment = None
