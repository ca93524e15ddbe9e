"""The InfiniCache proxy and its pool of cache-node functions (§4.1.2, Fig. 4.4).

``InfiniCache(options, open_platform)`` is one deployment: a proxy listening on loopback in
this process and ``options.nodes`` cache nodes, each a function invoked on a platform that
``open_platform`` opens (``faasml.runtime.platforms.contract.open_platform``: the caller passes
it, as this layer knows no platform) running ``faasml.sync.stores.infinicache.node:serve``.
The proxy

- places an object's d + p chunks on distinct nodes by consistent hashing and remembers
  where they are (the mapping table), evicting least-recently-used objects when a node's
  memory is full;
- answers a GET with the first d chunks that arrive (first-d, which also hides stragglers),
  each checked against its CRC;
- invokes a node when a request needs it and lets it return once idle for ``linger``
  seconds (it stops billing then); keeps idle nodes warm with a keep-alive invocation every
  ``warmup`` seconds, so that the platform does not reclaim them; makes a node return before
  its time limit; and moves a node's chunks to a fresh instance once it has lived
  ``lifetime`` seconds (backup);
- notices a lost node (its process died, or a keep-alive finds a fresh instance without the
  chunks) and repairs the lost chunks from d others in the background. An object with more
  than p chunks lost at once cannot be repaired: it is forgotten, and a GET is a clear miss
  (None), never wrong bytes.

Each node runs on a platform of its own (``_platforms``: the ``local`` or ``ray`` platform,
as ``options.platform`` says), so that a node's invocations go to the instance that holds
its chunks, as a Lambda function's invocations go to its own warm containers. Every node
invocation (requests, keep-alives, backups) is billed with the catalog: GB-seconds and a
price per invocation.

This module starts and stops a deployment and serves its clients; the rest is in
``_nodes`` (the pool of node functions), ``_keeper`` (keep-alives, time limits, backups) and
``_placement`` (the mapping table, first-d fetches, eviction and repair).
"""

from __future__ import annotations

import socket
import socketserver
import threading
import uuid
from typing import Any, Self

from faasml.exceptions import ConfigError, FaasmlError, StoreUnavailableError
from faasml.sync.param_server import _recv_frame, _send_frame
from faasml.sync.stores.infinicache import node as node_fn
from faasml.sync.stores.infinicache._codec import crc
from faasml.sync.stores.infinicache._placement import _Placement
from faasml.sync.stores.infinicache._platforms import close_platforms, node_platforms
from faasml.sync.stores.infinicache._state import InfiniCacheStats, _NodeDownError, _Object, _Slot

C_INFO, C_PUT, C_GET, C_DEL = 10, 11, 12, 13
OK, MISSING, ERROR = 0, 1, 3


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cache = self.server.cache
        try:
            op, header, payload = _recv_frame(sock)
        except (ConnectionError, OSError):
            return
        if op == node_fn.N_HELLO:
            done = cache._node_arrived(sock, header)
            done.wait()  # the socket stays open until the proxy lets the node go
            return
        while True:
            try:
                reply = cache._serve_client(op, header, payload)
            except FaasmlError as err:
                reply = ERROR, {"error": str(err), "kind": type(err).__name__}, b""
            try:
                _send_frame(sock, *reply)
                op, header, payload = _recv_frame(sock)
            except (ConnectionError, OSError):
                return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], cache: InfiniCache) -> None:
        self.cache = cache
        super().__init__(address, _Handler)


class InfiniCache(_Placement):
    """A proxy on ``host`` (loopback) and a free port, with its pool of cache nodes on the
    platforms ``open_platform`` opens."""

    def start(self) -> Self:
        """Listen, start the pool's threads, and invoke every node once (warm-up)."""
        platforms = node_platforms(self.options, self.catalog, self.open_platform)
        self._slots.extend(_Slot(index, platform) for index, platform in enumerate(platforms))
        self._server = _Server((self.host, 0), self)
        self.port = int(self._server.server_address[1])
        for target, name in (
            (self._server.serve_forever, "proxy"),
            (self._invoker, "invoker"),
            (self._keeper, "keeper"),
            (self._repairer, "repairer"),
        ):
            thread = threading.Thread(target=target, name=f"infinicache-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        try:
            answered = self.warm_up()
        except BaseException:
            self.close()
            raise
        if answered < self.options.nodes:
            self.close()
            raise StoreUnavailableError(
                f"infinicache: {self.options.nodes - answered} of {self.options.nodes} cache "
                "nodes did not start"
            )
        return self

    def close(self) -> None:
        """Let every node go, stop the platforms (their instances end) and the proxy."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._note()  # a node start being waited for gives up
        with self._repair_cond:
            self._repair_cond.notify_all()
        for slot in self._slots:
            self._release(slot)
        close_platforms([slot.platform for slot in self._slots])
        self._invokes.put(None)
        self._join_watchers()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=10)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put(self, key: str, size: int, digest: str, crcs: list[int], chunks: list[bytes]) -> None:
        """Place an encoded object's chunks and make it the value of ``key`` atomically."""
        d = self.options.data
        self.options.check_object(size)
        obj = _Object(
            key=key,
            version=uuid.uuid4().hex,
            size=size,
            chunk_size=len(chunks[0]),
            digest=digest,
            crcs=crcs,
            placement=self.ring.place(key, len(chunks)),
        )
        if any(crc(c) != w for c, w in zip(chunks, crcs, strict=True)):
            raise StoreUnavailableError(f"infinicache at {self.url}: a chunk arrived damaged")
        evicted = self._make_room(key, obj.placement, obj.chunk_size)
        if evicted:
            self._delete_chunks(evicted)
        calls = [self._pool.submit(self._store_chunk, obj, i, c) for i, c in enumerate(chunks)]
        failed = []
        for index, call in enumerate(calls):
            try:
                call.result()
            except _NodeDownError:
                failed.append(index)
        if len(chunks) - len(failed) < d:
            with self._lock:
                self._unaccount(obj)
            self._delete_chunks([obj])
            raise StoreUnavailableError(
                f"infinicache at {self.url}: only {len(chunks) - len(failed)} of "
                f"{len(chunks)} nodes took a chunk of {key!r}, {d} are needed"
            )
        with self._lock:
            old = self._objects.pop(key, None)
            self._objects[key] = obj
            if old is not None:
                self._unaccount(old)
        if failed:
            with self._repair_cond:
                self._repairs[key] = (obj.version, set(failed))
                self._repair_cond.notify_all()
        if old is not None:
            self._delete_chunks([old])

    def get(self, key: str) -> tuple[_Object, dict[int, bytes]] | None:
        """The object's entry and its first d good chunks; None on a miss (absent, or more
        than p chunks lost: then it is forgotten)."""
        d = self.options.data
        for _ in range(20):
            with self._lock:
                obj = self._objects.get(key)
                if obj is None:
                    return None
                self._objects.move_to_end(key)
            good, unreachable = self._gather(obj, list(range(len(obj.placement))), d)
            if len(good) >= d:
                return obj, good
            if len(good) + unreachable >= d:
                raise StoreUnavailableError(
                    f"infinicache at {self.url}: {unreachable} nodes holding chunks of "
                    f"{key!r} cannot be reached now"
                )
            if self._forget(key, obj.version, lost=True) is not None:
                self._delete_chunks([obj])
                return None
        raise StoreUnavailableError(f"infinicache: value under {key!r} kept changing")

    def delete_prefix(self, prefix: str) -> int:
        with self._lock:
            keys = [k for k in self._objects if k.startswith(prefix)]
        objs = [o for o in (self._forget(k, None) for k in keys) if o is not None]
        self._delete_chunks(objs)
        return len(objs)

    def _serve_client(
        self, op: int, header: dict[str, Any], payload: bytes
    ) -> tuple[int, dict[str, Any], bytes]:
        if op == C_INFO:
            opts = self.options
            return OK, {"data": opts.data, "parity": opts.parity, "memory": opts.memory}, b""
        if op == C_PUT:
            size, total = int(header["chunk_size"]), self.options.chunks
            if len(payload) != size * total:
                raise ConfigError(f"a PUT of {total} chunks of {size} bytes sent {len(payload)}")
            view = memoryview(payload)
            chunks = [bytes(view[i * size : (i + 1) * size]) for i in range(total)]
            self.put(header["key"], int(header["size"]), header["digest"], header["crcs"], chunks)
            return OK, {}, b""
        if op == C_GET:
            found = self.get(header["key"])
            if found is None:
                return MISSING, {}, b""
            obj, good = found
            indices = sorted(good)[: self.options.data]
            reply = {"size": obj.size, "digest": obj.digest, "indices": indices}
            reply["chunk_size"] = obj.chunk_size
            return OK, reply, b"".join(good[i] for i in indices)
        if op == C_DEL:
            return OK, {"removed": self.delete_prefix(header["prefix"])}, b""
        raise ConfigError(f"unknown infinicache operation {op}")

    def bill(self) -> dict[str, float]:
        """What the nodes cost so far: invocations, GB-seconds and USD (by the catalog)."""
        with self._lock:
            stats = InfiniCacheStats(**vars(self.stats))
        function_usd = stats.gb_s * self.catalog.platform.price_per_gb_s
        invocation_usd = stats.invocations * self.catalog.platform.price_per_invocation
        return {
            "invocations": float(stats.invocations),
            "gb_s": stats.gb_s,
            "function_usd": function_usd,
            "invocation_usd": invocation_usd,
            "usd": function_usd + invocation_usd,
        }

    def objects(self) -> int:
        with self._lock:
            return len(self._objects)


__all__ = [
    "C_DEL",
    "C_GET",
    "C_INFO",
    "C_PUT",
    "ERROR",
    "MISSING",
    "OK",
    "InfiniCache",
    "InfiniCacheStats",
]
