"""Placement and repair (§4.1.2): where an object's chunks are (the mapping table), fetching
the first d good ones, storing, deleting and evicting chunks (LRU), and rebuilding lost chunks
from d others in the background.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import as_completed

from faasml.sync.stores.infinicache import node as node_fn
from faasml.sync.stores.infinicache._codec import crc, rebuild
from faasml.sync.stores.infinicache._keeper import _Keeper
from faasml.sync.stores.infinicache._state import _NodeDownError, _Object


class _Placement(_Keeper):
    """The mapping table and the repairer."""

    def node_of(self, key: str) -> list[int]:
        """The nodes that hold ``key``'s chunks, in chunk order (empty when not cached)."""
        with self._lock:
            obj = self._objects.get(key)
            return list(obj.placement) if obj is not None else []

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
