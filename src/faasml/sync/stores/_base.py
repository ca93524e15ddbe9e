"""The Store contract: put, get and delete by prefix, with every request and byte counted.

Invariants every implementation keeps (checked by ``faasml.testing.store_conformance``):
- ``put`` is atomic: a reader sees the whole old value, the whole new value or nothing.
- ``get`` of a missing key returns None, never raises.
- ``delete(prefix)`` removes every key starting with ``prefix`` and returns how many.
- Counting happens here, in the public methods, so that billing sees every request whatever
  the implementation; implementations override the underscored methods only. One whose call
  costs several service requests (chunked values, list + delete) reports the extra ones with
  ``_count_extra`` so that the bill sees them too.
- One Store object may be used by several threads of one process; across processes each
  opens its own from the same URL.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Self


@dataclass
class StoreStats:
    """Requests and bytes a store client issued: what request-priced storage bills."""

    puts: int = 0
    gets: int = 0
    deletes: int = 0
    lists: int = 0
    bytes_written: int = 0
    bytes_read: int = 0

    def copy(self) -> StoreStats:
        return StoreStats(**vars(self))


class Store(ABC):
    """A key-value store reached by URL; keys are '/'-separated strings, values bytes."""

    max_poll_s: float = 0.05
    """Longest pause between two polls of ``wait_get``; stores with cheap GETs lower it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stats = StoreStats()
        self._stats_lock = threading.Lock()

    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> Self:
        """Open a client for the store at ``url``."""

    @classmethod
    def check_url(cls, url: str) -> None:
        """Refuse, without connecting, a URL ``from_url`` would refuse for its form (a job is
        checked with it when read, so it is not refused after the run has been billed)."""
        return None  # most stores have no rule beyond their scheme's

    @abstractmethod
    def _put(self, key: str, value: bytes) -> None: ...

    @abstractmethod
    def _get(self, key: str) -> bytes | None: ...

    @abstractmethod
    def _delete_prefix(self, prefix: str) -> int: ...

    def put(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key`` atomically, replacing any old value."""
        self._put(key, value)
        with self._stats_lock:
            self.stats.puts += 1
            self.stats.bytes_written += len(value)

    def get(self, key: str) -> bytes | None:
        """The value under ``key``, or None when there is none."""
        value = self._get(key)
        with self._stats_lock:
            self.stats.gets += 1
            self.stats.bytes_read += len(value) if value is not None else 0
        return value

    def delete(self, prefix: str) -> int:
        """Remove every key that starts with ``prefix``; returns how many were removed."""
        removed = self._delete_prefix(prefix)
        with self._stats_lock:
            self.stats.deletes += 1
        return removed

    def _count_extra(
        self,
        *,
        puts: int = 0,
        gets: int = 0,
        deletes: int = 0,
        lists: int = 0,
        bytes_written: int = 0,
        bytes_read: int = 0,
    ) -> None:
        """Count service requests (and bytes) beyond what each public call already counts."""
        with self._stats_lock:
            self.stats.puts += puts
            self.stats.gets += gets
            self.stats.deletes += deletes
            self.stats.lists += lists
            self.stats.bytes_written += bytes_written
            self.stats.bytes_read += bytes_read

    def wait_get(self, key: str, timeout_s: float, poll_s: float = 0.001) -> bytes:
        """Poll until ``key`` exists (every poll is a counted GET); TimeoutError after
        ``timeout_s``. Polls back off from ``poll_s`` to ``max_poll_s`` (50 ms by default)."""
        deadline = time.monotonic() + timeout_s
        delay = poll_s
        while True:
            value = self.get(key)
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{self.url}: no value under {key!r} after {timeout_s:g} s")
            time.sleep(delay)
            delay = min(delay * 2, self.max_poll_s)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default has none."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
