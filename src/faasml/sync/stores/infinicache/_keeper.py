"""Warm-up and backup (§4.1.2): keep-alive invocations of idle nodes on a schedule, nodes let
go after ``linger`` and before their time limit, and an instance older than ``lifetime``
handing its chunks to a fresh one.
"""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

from faasml.exceptions import FunctionError, StoreUnavailableError
from faasml.sync.param_server import _recv_frame, _send_frame
from faasml.sync.stores.infinicache import node as node_fn
from faasml.sync.stores.infinicache._nodes import _NodePool
from faasml.sync.stores.infinicache._state import END_MARGIN, START_TIMEOUT_S, _NodeDownError, _Slot


class _Keeper(_NodePool):
    """The keeper thread: keep-alives, time limits and backups of the pool's nodes."""

    def warm_up(self) -> int:
        """Keep-alive every node now (in parallel); returns how many answered. A node found
        to be a fresh instance has lost its chunks: they are queued for repair."""
        futures = [self._pool.submit(self._keep_alive, slot) for slot in self._slots]
        return sum(future.result() for future in futures)

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


def _exchange(
    sock: socket.socket, op: int, header: dict[str, Any], payload: bytes = b""
) -> tuple[int, dict[str, Any], bytes]:
    _send_frame(sock, op, header, payload)
    return _recv_frame(sock)
