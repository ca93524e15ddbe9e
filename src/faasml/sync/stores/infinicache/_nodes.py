"""The proxy's pool of cache-node functions (§4.1.2): invoking a node and waiting until it
connects, one request to it, letting it go, and noticing a node lost with its chunks.

Each node runs on a platform of its own (``_platforms``: local or Ray), so that a node's
invocations go to the instance that holds its chunks, as a Lambda function's invocations go
to its own warm containers. Every node invocation is billed with the catalog when it ends.
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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Self

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError, FaasmlError, FunctionError, StoreUnavailableError
from faasml.sync.param_server import _recv_frame, _send_frame
from faasml.sync.stores.infinicache import node as node_fn
from faasml.sync.stores.infinicache._options import Options
from faasml.sync.stores.infinicache._ring import HashRing
from faasml.sync.stores.infinicache._state import (
    NODE_FUNCTION,
    SETTLE_TIMEOUT_S,
    START_TIMEOUT_S,
    InfiniCacheStats,
    NodeInvocation,
    OpenPlatform,
    _NodeDownError,
    _Object,
    _Slot,
)


class _NodePool:
    """A deployment's state and its cache nodes' lifecycle."""

    def __init__(
        self, options: Options, open_platform: OpenPlatform, host: str = "127.0.0.1"
    ) -> None:
        self.options = options.check()
        self.open_platform = open_platform
        """Opens the platform each node runs on
        (``faasml.runtime.platforms.contract.open_platform``)."""
        self.catalog = load_catalog(options.catalog)
        platform = self.catalog.platform
        low, high = platform.memory_min_mb, platform.memory_max_mb
        if not low <= options.memory <= high:
            raise ConfigError(
                f"the value of memory_mb is {options.memory}, but {platform.name} offers "
                f"{low}..{high} MB"
            )
        capacity = platform.capacity_memory_mb
        if capacity is not None and options.nodes * options.memory > capacity:
            raise ConfigError(
                f"infinicache nodes x memory is {options.nodes * options.memory} MB, but "
                f"the {platform.name} platform holds at most {capacity:g} MB of functions"
            )
        self.host = host
        self.port = 0
        self.stats = InfiniCacheStats()
        self.ring = HashRing(list(range(options.nodes)))
        self._lock = threading.Lock()
        self._objects: OrderedDict[str, _Object] = OrderedDict()
        self._slots: list[_Slot] = []
        self._changed = threading.Condition()
        self._repairs: dict[str, tuple[str, set[int]]] = {}
        self._repairing = 0
        self._repair_cond = threading.Condition()
        self._stop = threading.Event()
        self._invokes: queue.Queue[tuple[_Slot, str, Future[NodeInvocation]] | None] = queue.Queue()
        self._pool = ThreadPoolExecutor(max_workers=max(8, 2 * options.nodes))
        self._threads: list[threading.Thread] = []
        self._watchers: list[threading.Thread] = []
        self._unbilled = 0
        """Node invocations started and not yet billed (guarded by ``_changed``)."""
        self._server: socketserver.ThreadingTCPServer | None = None

    @property
    def url(self) -> str:
        return f"infinicache://{self.host}:{self.port}"

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
            with self._changed:  # counted before anyone can use it: ``settle`` waits for it
                self._unbilled += 1
            future.set_result(invocation)
            watcher = threading.Thread(
                target=self._watch, args=(slot, invocation), name="infinicache-node", daemon=True
            )
            watcher.start()
            with self._lock:
                self._watchers = [w for w in self._watchers if w.is_alive()] + [watcher]

    def _watch(self, slot: _Slot, invocation: NodeInvocation) -> None:
        """Bill a node invocation when it ends; a node that died takes its chunks along."""
        failure: FunctionError | None = None
        try:
            invocation.result()
        except FunctionError as err:
            failure = err
        with self._changed:
            self._changed.notify_all()
        billed = invocation.billed
        try:
            if billed is not None:
                with self._lock:
                    self.stats.invocations += 1
                    self.stats.gb_s += billed.duration_s * billed.memory_mb / 1024
        finally:
            with self._changed:
                self._unbilled -= 1
                self._changed.notify_all()
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

    def _connect(self, slot: _Slot) -> tuple[dict[str, Any], NodeInvocation]:
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
        future: Future[NodeInvocation] = Future()
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

    def wait_until(self, predicate: Callable[[Self], bool], timeout_s: float) -> bool:
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

    def release_idle(self) -> None:
        """Let every connected node return now (as ``linger`` would, without the wait)."""
        for slot in self._slots:
            self._release(slot)

    def settle(self) -> None:
        """Let every node return and wait until every invocation started so far is billed.

        It waits on a count kept from the moment an invocation starts, not on the watcher
        threads seen at the call: a watcher registered a moment late (the invoker thread
        descheduled on a busy machine) would otherwise be missed and its invocation left out
        of a bill read right after."""
        self.release_idle()
        with self._changed:
            if not self._changed.wait_for(lambda: self._unbilled == 0, SETTLE_TIMEOUT_S):
                raise StoreUnavailableError(
                    f"infinicache at {self.url}: {self._unbilled} node invocation(s) still "
                    f"running {SETTLE_TIMEOUT_S:g} s after their nodes were let go"
                )

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
