"""The InfiniCache proxy and its pool of cache-node functions (§4.1.2, Fig. 4.4).

``InfiniCache(options)`` is one deployment: a proxy listening on loopback in this process
and ``options.nodes`` cache nodes, each a function invoked on the platform
(``faasml.sync.stores.infinicache.node:serve``). The proxy

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

Each node runs on a platform of its own (one ``LocalPlatform`` per node), so that a node's
invocations go to the instance that holds its chunks, as a Lambda function's invocations go
to its own warm containers. Every node invocation (requests, keep-alives, backups) is billed
with the catalog: GB-seconds and a price per invocation.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import socketserver
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Self

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError, FaasmlError, StoreUnavailableError
from faasml.runtime.billing import Meter
from faasml.runtime.platform import FunctionError, Invocation
from faasml.runtime.platforms._common import check_memory
from faasml.runtime.platforms.local import LocalPlatform
from faasml.sync.param_server import _recv_frame, _send_frame
from faasml.sync.stores.infinicache import node as node_fn
from faasml.sync.stores.infinicache._codec import crc, rebuild
from faasml.sync.stores.infinicache._options import Options
from faasml.sync.stores.infinicache._ring import HashRing

C_INFO, C_PUT, C_GET, C_DEL = 10, 11, 12, 13
OK, MISSING, ERROR = 0, 1, 3
NODE_FUNCTION = "faasml.sync.stores.infinicache.node:serve"
START_TIMEOUT_S = 120.0
"""Longest wait for a node invocation to connect (a cold start under a small CPU share)."""
END_MARGIN = 0.1
"""A node returns when this fraction of its time limit is left."""


class _NodeDownError(Exception):
    """A node could not be reached for a request."""


@dataclass
class _Object:
    """One entry of the mapping table: where an object's chunks are and how to check them."""

    key: str
    version: str
    size: int
    chunk_size: int
    digest: str
    crcs: list[int]
    placement: list[int]

    def chunk_id(self, index: int) -> str:
        return f"{self.version}/{index}"


@dataclass(eq=False)
class _Slot:
    """One cache node: its platform, its connection while an invocation runs, its chunks."""

    index: int
    platform: LocalPlatform
    lock: threading.RLock = field(default_factory=threading.RLock)
    sock: socket.socket | None = None
    release: threading.Event | None = None
    invocation: Invocation | None = None
    ending: Invocation | None = None
    """The invocation last let go, until it has ended (its instance is idle again)."""
    invoked_at: float = 0.0
    last_active: float = 0.0
    instance: str | None = None
    pid: int = 0
    started: float = 0.0
    token: str | None = None
    arrival: tuple[socket.socket, dict[str, Any], threading.Event] | None = None
    chunks: dict[str, tuple[str, str, int, int]] = field(default_factory=dict)
    """chunk id -> (key, version, index, bytes) of what this node holds."""
    used: int = 0


@dataclass
class InfiniCacheStats:
    """What the deployment did: objects lost and repaired, node losses, keep-alives."""

    node_losses: int = 0
    chunks_lost: int = 0
    chunks_repaired: int = 0
    objects_lost: int = 0
    objects_evicted: int = 0
    warmups: int = 0
    backups: int = 0
    repair_errors: int = 0
    invocations: int = 0
    gb_s: float = 0.0


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


class InfiniCache:
    """A proxy on ``host`` (loopback) and a free port, with its pool of cache nodes."""

    def __init__(self, options: Options, host: str = "127.0.0.1") -> None:
        self.options = options.check()
        self.catalog = load_catalog(options.catalog)
        platform = self.catalog.platform
        check_memory(platform, options.memory)
        capacity = platform.capacity_memory_mb
        if capacity is not None and options.nodes * options.memory > capacity:
            raise ConfigError(
                f"infinicache nodes x memory is {options.nodes * options.memory} MB, but "
                f"the {platform.name} platform holds at most {capacity:g} MB of functions"
            )
        self.host = host
        self.port = 0
        self.stats = InfiniCacheStats()
        self.meter = Meter(self.catalog)
        self.ring = HashRing(list(range(options.nodes)))
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._objects: OrderedDict[str, _Object] = OrderedDict()
        self._slots: list[_Slot] = []
        self._changed = threading.Condition()
        self._repairs: dict[str, tuple[str, set[int]]] = {}
        self._repairing = 0
        self._repair_cond = threading.Condition()
        self._stop = threading.Event()
        self._invokes: queue.Queue[tuple[_Slot, str, Future[Invocation]] | None] = queue.Queue()
        self._pool = ThreadPoolExecutor(max_workers=max(8, 2 * options.nodes))
        self._threads: list[threading.Thread] = []
        self._watchers: list[threading.Thread] = []
        self._server: _Server | None = None

    # ----------------------------------------------------------------- life

    @property
    def url(self) -> str:
        return f"infinicache://{self.host}:{self.port}"

    def start(self) -> Self:
        """Listen, start the pool's threads, and invoke every node once (warm-up)."""
        for index in range(self.options.nodes):
            platform = LocalPlatform(
                self.catalog, cpu=self.options.cpu, idle_timeout_s=self.options.reclaim
            )
            self._slots.append(_Slot(index, platform))
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
        for slot in self._slots:
            slot.platform.close()
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

    # ----------------------------------------------------------------- nodes

    def _invoker(self) -> None:
        """Invoke nodes from this one long-lived thread: a node process is tied to the thread
        that started it (it dies with it), so no short-lived thread may start one."""
        while True:
            item = self._invokes.get()
            if item is None:
                return
            slot, token, future = item
            payload = {"host": self.host, "port": self.port, "slot": slot.index, "token": token}
            try:
                invocation = slot.platform.invoke(NODE_FUNCTION, payload, self.options.memory)
            except BaseException as err:
                future.set_exception(err)
                continue
            future.set_result(invocation)
            watcher = threading.Thread(
                target=self._watch, args=(slot, invocation), name="infinicache-node", daemon=True
            )
            watcher.start()
            with self._lock:
                self._watchers = [w for w in self._watchers if w.is_alive()] + [watcher]

    def _watch(self, slot: _Slot, invocation: Invocation) -> None:
        """Bill a node invocation when it ends; a node that died takes its chunks along."""
        failure: FunctionError | None = None
        try:
            invocation.result()
        except FunctionError as err:
            failure = err
        with self._changed:
            self._changed.notify_all()
        billed = invocation.billed
        if billed is not None:
            self.meter.invocation(billed, time.monotonic() - self._t0)
            with self._lock:
                self.stats.invocations += 1
                self.stats.gb_s += billed.duration_s * billed.memory_mb / 1024
            self._note()
        with slot.lock:
            if slot.invocation is not invocation:
                return
            self._drop(slot)
            if failure is not None and failure.kind != "cancelled":
                self._instance_lost(slot)

    def _node_arrived(self, sock: socket.socket, hello: dict[str, Any]) -> threading.Event:
        """A node invocation connected; the event is set when the proxy lets it go."""
        done = threading.Event()
        with self._changed:
            index = int(hello.get("slot", -1))
            slot = self._slots[index] if 0 <= index < len(self._slots) else None
            if slot is None or hello.get("token") != slot.token or slot.arrival is not None:
                with contextlib.suppress(OSError):
                    _send_frame(sock, node_fn.N_BYE, {}, b"")
                done.set()
                return done
            slot.arrival = (sock, hello, done)
            self._changed.notify_all()
        return done

    def _connect(self, slot: _Slot) -> tuple[dict[str, Any], Invocation]:
        """Invoke the node and wait until it connects (slot lock held)."""
        if self._stop.is_set():
            raise StoreUnavailableError(f"infinicache at {self.url} is closed")
        if slot.ending is not None:
            # Until the last invocation has ended its instance is busy, and a new invocation
            # would start a fresh instance without the chunks.
            with contextlib.suppress(FunctionError, TimeoutError):
                slot.ending.result(START_TIMEOUT_S)
            slot.ending = None
        token = uuid.uuid4().hex
        with self._changed:
            slot.token, slot.arrival = token, None
        future: Future[Invocation] = Future()
        self._invokes.put((slot, token, future))
        try:
            invocation = future.result(START_TIMEOUT_S)
        except (FaasmlError, TimeoutError) as err:  # the platform is full or closed
            raise StoreUnavailableError(f"infinicache node {slot.index}: {err}") from err
        with self._changed:
            self._changed.wait_for(
                lambda: slot.arrival is not None or invocation.done() or self._stop.is_set(),
                START_TIMEOUT_S,
            )
            arrival, slot.arrival, slot.token = slot.arrival, None, None
        if arrival is None:
            invocation.cancel()
            slot.ending = invocation
            reason = "it ended first" if invocation.done() else f"not in {START_TIMEOUT_S:g} s"
            with contextlib.suppress(FunctionError, TimeoutError):
                invocation.result(0)
            raise StoreUnavailableError(f"infinicache node {slot.index} did not connect: {reason}")
        sock, hello, done = arrival
        now = time.monotonic()
        slot.sock, slot.release, slot.invocation = sock, done, invocation
        slot.invoked_at = slot.last_active = now
        return hello, invocation

    def _ensure(self, slot: _Slot) -> None:
        """A connected node for ``slot`` (slot lock held); chunks it no longer has are lost."""
        if slot.sock is not None:
            return
        hello, _ = self._connect(slot)
        reported = set(hello.get("chunks", ()))
        if hello["instance"] != slot.instance:
            if slot.instance is not None:
                self._instance_lost(slot)
            slot.instance, slot.pid = str(hello["instance"]), int(hello["pid"])
            slot.started = float(hello["started"])
        lost = [cid for cid in list(slot.chunks) if cid not in reported]
        if lost:
            self._lose(slot, lost)

    def _instance_lost(self, slot: _Slot) -> None:
        with self._lock:
            self.stats.node_losses += 1
        slot.instance = None
        self._lose(slot, list(slot.chunks))

    def _lose(self, slot: _Slot, ids: list[str]) -> None:
        """Chunks gone with a node: forget them there and queue their objects for repair."""
        with self._lock:
            for cid in ids:
                entry = slot.chunks.pop(cid, None)
                if entry is None:
                    continue
                key, version, index, size = entry
                slot.used -= size
                self.stats.chunks_lost += 1
                obj = self._objects.get(key)
                if obj is not None and obj.version == version:
                    with self._repair_cond:
                        _, missing = self._repairs.setdefault(key, (version, set()))
                        missing.add(index)
                        self._repair_cond.notify_all()

    def _drop(self, slot: _Slot) -> None:
        """Forget the node's connection (slot lock held); its handler thread ends."""
        if slot.sock is not None:
            with contextlib.suppress(OSError):
                slot.sock.shutdown(socket.SHUT_RDWR)
        if slot.release is not None:
            slot.release.set()
        if slot.invocation is not None:
            slot.ending = slot.invocation
        slot.sock, slot.release, slot.invocation = None, None, None
        self._note()

    def _note(self) -> None:
        """Wake whoever waits in ``wait_until``."""
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, predicate: Callable[[InfiniCache], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(self)`` holds (checked whenever a node connects or lets
        go, an invocation is billed, a keep-alive or a backup is done); False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout_s)

    def connected(self) -> int:
        """Nodes whose invocation is running and connected now."""
        return sum(slot.sock is not None for slot in self._slots)

    def _release(self, slot: _Slot) -> None:
        """Say goodbye to a connected node: its invocation returns and stops billing."""
        with slot.lock:
            if slot.sock is None:
                return
            with contextlib.suppress(ConnectionError, OSError):
                _send_frame(slot.sock, node_fn.N_BYE, {}, b"")
                _recv_frame(slot.sock)
            self._drop(slot)

    def _call(
        self, slot: _Slot, op: int, header: dict[str, Any], payload: bytes = b""
    ) -> tuple[int, dict[str, Any], bytes]:
        """One request to a node, invoking it when none is connected; _NodeDownError if lost."""
        with slot.lock:
            # A node that died while idle may take one invocation down with it before the
            # platform notices; the next one lands on a fresh instance.
            for attempt in range(3):
                try:
                    self._ensure(slot)
                    assert slot.sock is not None
                    _send_frame(slot.sock, op, header, payload)
                    reply = _recv_frame(slot.sock)
                except (StoreUnavailableError, ConnectionError, OSError) as err:
                    self._drop(slot)
                    if attempt == 2 or self._stop.is_set():
                        raise _NodeDownError(f"node {slot.index}: {err}") from err
                    continue
                slot.last_active = time.monotonic()
                return reply
        raise AssertionError("unreachable")

    def warm_up(self) -> int:
        """Keep-alive every node now (in parallel); returns how many answered. A node found
        to be a fresh instance has lost its chunks: they are queued for repair."""
        futures = [self._pool.submit(self._keep_alive, slot) for slot in self._slots]
        return sum(future.result() for future in futures)

    def release_idle(self) -> None:
        """Let every connected node return now (as ``linger`` would, without the wait)."""
        for slot in self._slots:
            self._release(slot)

    def settle(self) -> None:
        """Let every node return and wait until their invocations are billed."""
        self.release_idle()
        self._join_watchers()

    def _join_watchers(self) -> None:
        with self._lock:
            watchers = list(self._watchers)
        for watcher in watchers:
            watcher.join(timeout=30)

    def kill_node(self, index: int) -> None:
        """Kill node ``index``'s process (a reclaimed or crashed function; for tests and the
        fault-tolerance benchmark). The proxy notices when the invocation ends or, for an idle
        node, at its next invocation."""
        slot = self._slots[index]
        with slot.lock:
            pid = slot.pid
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def node_of(self, key: str) -> list[int]:
        """The nodes that hold ``key``'s chunks, in chunk order (empty when not cached)."""
        with self._lock:
            obj = self._objects.get(key)
            return list(obj.placement) if obj is not None else []

    def backup(self, index: int) -> None:
        """Move node ``index``'s chunks to a fresh instance and end the old one (what the
        keeper does once an instance has lived ``lifetime`` seconds)."""
        slot = self._slots[index]
        with slot.lock:
            try:
                _, listing, _ = self._call(slot, node_fn.N_DUMP, {})
            except _NodeDownError:
                return
            old = (slot.sock, slot.release, slot.invocation)
            slot.sock = slot.release = slot.invocation = None
            try:
                hello, _ = self._connect(slot)  # the old instance is busy: a fresh one starts
            except StoreUnavailableError:
                slot.sock, slot.release, slot.invocation = old
                return
            assert old[0] is not None and slot.sock is not None
            moved: set[str] = set()
            for cid in listing["ids"]:
                if cid not in slot.chunks:
                    continue
                try:
                    code, _, chunk = _exchange(old[0], node_fn.N_GET, {"id": cid})
                    if code == node_fn.OK:
                        _exchange(slot.sock, node_fn.N_PUT, {"id": cid}, chunk)
                        moved.add(cid)
                except (ConnectionError, OSError):
                    break
            if old[2] is not None:
                # The old instance must end for good. Had its invocation returned on its own
                # (its connection closed first), the instance would stay warm and idle, and the
                # platform could send the node's next invocation to it instead of the fresh
                # one: another instance, read as a lost node. The platform stops the instance
                # of a running invocation that is cancelled; wait until it has.
                old[2].cancel()
                with contextlib.suppress(FunctionError, TimeoutError):
                    old[2].result(START_TIMEOUT_S)
            with contextlib.suppress(OSError):
                old[0].shutdown(socket.SHUT_RDWR)
            if old[1] is not None:
                old[1].set()
            slot.instance, slot.pid = str(hello["instance"]), int(hello["pid"])
            slot.started = float(hello["started"])
            gone = [cid for cid in list(slot.chunks) if cid not in moved]
            if gone:
                self._lose(slot, gone)
        with self._lock:
            self.stats.backups += 1
        self._note()

    def _keeper(self) -> None:
        """Let idle nodes go after ``linger``, end invocations before their time limit, keep
        idle nodes warm every ``warmup`` seconds and back up old instances."""
        opts = self.options
        limit = self.catalog.platform.max_duration_s * (1 - END_MARGIN)
        tick = min(opts.linger, opts.warmup, opts.lifetime, 1.0) / 2
        last_warm = [time.monotonic()] * len(self._slots)
        backing: set[int] = set()
        while not self._stop.wait(tick):
            now = time.monotonic()
            for slot in self._slots:
                if not slot.lock.acquire(blocking=False):
                    last_warm[slot.index] = now  # busy: it is warm
                    continue
                try:
                    if slot.sock is not None:
                        last_warm[slot.index] = now
                        idle = now - slot.last_active > opts.linger
                        if idle or now - slot.invoked_at > limit:
                            self._release(slot)
                        continue
                    due_warm = now - last_warm[slot.index] > opts.warmup
                    due_backup = slot.instance is not None and (
                        time.time() - slot.started > opts.lifetime
                    )
                finally:
                    slot.lock.release()
                if due_backup and slot.index not in backing:
                    backing.add(slot.index)
                    self._pool.submit(self._backup_once, slot.index, backing)
                    last_warm[slot.index] = now
                elif due_warm:
                    last_warm[slot.index] = now
                    self._pool.submit(self._keep_alive, slot)

    def _backup_once(self, index: int, backing: set[int]) -> None:
        try:
            self.backup(index)
        finally:
            backing.discard(index)

    def _keep_alive(self, slot: _Slot) -> bool:
        """Invoke an idle node, ping it and let it go at once (a short, cheap invocation);
        a running node is only pinged. False when it could not be reached."""
        answered = True
        with slot.lock:
            running = slot.sock is not None
            try:
                self._call(slot, node_fn.N_PING, {})
            except _NodeDownError:
                answered = False
            if not running:
                self._release(slot)
        with self._lock:
            self.stats.warmups += 1
        self._note()
        return answered

    # ----------------------------------------------------------------- repair

    def _repairer(self) -> None:
        while True:
            with self._repair_cond:
                self._repair_cond.wait_for(lambda: bool(self._repairs) or self._stop.is_set())
                if self._stop.is_set():
                    return
                key = next(iter(self._repairs))
                version, missing = self._repairs.pop(key)
                self._repairing += 1
            try:
                if not self._repair(key, version, sorted(missing)):
                    self._stop.wait(0.5)  # nodes unreachable now: back off, then try again
            except Exception:  # the repairer must live on; the object stays as it was
                with self._lock:
                    self.stats.repair_errors += 1
            finally:
                with self._repair_cond:
                    self._repairing -= 1
                    self._repair_cond.notify_all()

    def _repair(self, key: str, version: str, missing: list[int]) -> bool:
        """Rebuild chunks ``missing`` of ``key`` from d others (§4.1.2 recovery); forget the
        object when fewer than d are left. False when it must be tried again later."""
        with self._lock:
            obj = self._objects.get(key)
        if obj is None or obj.version != version:
            return True
        d, p = self.options.data, self.options.parity
        others = [i for i in range(d + p) if i not in missing]
        good, unreachable = self._gather(obj, others, d)
        if len(good) < d:
            if len(good) + unreachable < d:
                if self._forget(key, version, lost=True) is not None:
                    self._delete_chunks([obj])
                return True
            with self._repair_cond:  # not provably lost: try again later
                self._repairs.setdefault(key, (version, set()))[1].update(missing)
            return False
        done = True
        for index, chunk in zip(missing, rebuild(good, d, p, missing), strict=True):
            if crc(chunk) != obj.crcs[index]:
                raise AssertionError(f"rebuilt chunk {index} of {key!r} fails its CRC")
            try:
                self._store_chunk(obj, index, chunk)
            except _NodeDownError:
                with self._repair_cond:
                    self._repairs.setdefault(key, (version, set()))[1].add(index)
                done = False
                continue
            with self._lock:
                self.stats.chunks_repaired += 1
                current = self._objects.get(key)
                stale = current is None or current.version != version
                if stale:  # overwritten or deleted meanwhile: the rebuilt chunk goes too
                    self._unaccount(obj)
            if stale:
                self._delete_chunks([obj])
        return done

    def wait_repaired(self, timeout_s: float = 60.0) -> bool:
        """Wait until no repair is queued or running; False when ``timeout_s`` passed first."""
        with self._repair_cond:
            return self._repair_cond.wait_for(
                lambda: not self._repairs and self._repairing == 0, timeout_s
            )

    # ----------------------------------------------------------------- objects

    def _fetch(self, obj: _Object, index: int) -> bytes | None:
        """Chunk ``index`` of ``obj`` when its node has it whole (CRC checked), None when the
        node answers without it; _NodeDownError when the node cannot be reached."""
        slot = self._slots[obj.placement[index]]
        code, _, chunk = self._call(slot, node_fn.N_GET, {"id": obj.chunk_id(index)})
        if code != node_fn.OK or len(chunk) != obj.chunk_size or crc(chunk) != obj.crcs[index]:
            return None
        return chunk

    def _gather(self, obj: _Object, indices: list[int], want: int) -> tuple[dict[int, bytes], int]:
        """The first ``want`` good chunks among ``indices`` (asked in parallel), and how many
        nodes could not be reached (their chunks may still be there)."""
        futures = {self._pool.submit(self._fetch, obj, i): i for i in indices}
        good: dict[int, bytes] = {}
        unreachable = 0
        for future in as_completed(futures):
            try:
                chunk = future.result()
            except _NodeDownError:
                unreachable += 1
                continue
            if chunk is not None:
                good[futures[future]] = chunk
                if len(good) == want:
                    break
        return good, unreachable

    def _store_chunk(self, obj: _Object, index: int, chunk: bytes) -> None:
        slot = self._slots[obj.placement[index]]
        cid = obj.chunk_id(index)
        with slot.lock:
            self._call(slot, node_fn.N_PUT, {"id": cid}, chunk)
            with self._lock:
                if cid not in slot.chunks:
                    slot.used += len(chunk)
                slot.chunks[cid] = (obj.key, obj.version, index, len(chunk))

    def _forget(self, key: str, version: str | None, *, lost: bool = False) -> _Object | None:
        """Remove ``key`` from the table (only that version, when given) and its chunks from
        the nodes' accounts; returns the entry so that its chunks can be deleted."""
        with self._lock:
            obj = self._objects.get(key)
            if obj is None or (version is not None and obj.version != version):
                return None
            del self._objects[key]
            self._unaccount(obj)
            if lost:
                self.stats.objects_lost += 1
        return obj

    def _unaccount(self, obj: _Object) -> None:
        for index, node in enumerate(obj.placement):
            entry = self._slots[node].chunks.pop(obj.chunk_id(index), None)
            if entry is not None:
                self._slots[node].used -= entry[3]

    def _delete_chunks(self, objs: list[_Object]) -> None:
        by_node: dict[int, list[str]] = {}
        for obj in objs:
            for index, node in enumerate(obj.placement):
                by_node.setdefault(node, []).append(obj.chunk_id(index))
        calls = [
            self._pool.submit(self._call, self._slots[node], node_fn.N_DEL, {"ids": ids})
            for node, ids in by_node.items()
        ]
        for call in calls:
            with contextlib.suppress(_NodeDownError):
                call.result()

    def _make_room(self, key: str, placement: list[int], size: int) -> list[_Object]:
        """Evict least-recently-used objects until ``size`` more bytes fit on each node of
        ``placement`` (the proxy's LRU, §4.1.2); returns what was evicted."""
        capacity = self.options.node_capacity_bytes
        evicted: list[_Object] = []
        with self._lock:
            while any(self._slots[n].used + size > capacity for n in placement):
                victim = next((o for k, o in self._objects.items() if k != key), None)
                if victim is None:
                    break
                del self._objects[victim.key]
                self._unaccount(victim)
                evicted.append(victim)
                self.stats.objects_evicted += 1
        return evicted

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

    # ----------------------------------------------------------------- clients

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
        by_kind = self.meter.by_kind()
        return {
            "invocations": float(stats.invocations),
            "gb_s": stats.gb_s,
            "function_usd": by_kind.get("function", 0.0),
            "invocation_usd": by_kind.get("invocation", 0.0),
            "usd": self.meter.total_usd,
        }

    def objects(self) -> int:
        with self._lock:
            return len(self._objects)


def _exchange(
    sock: socket.socket, op: int, header: dict[str, Any], payload: bytes = b""
) -> tuple[int, dict[str, Any], bytes]:
    _send_frame(sock, op, header, payload)
    return _recv_frame(sock)
