"""A store seen through a function's network link of limited bandwidth.

A serverless function moves data at most at its network bandwidth (the catalog's
``network_mbps(m)``, e.g. about 75 MB/s for a 1769 MB Lambda): that, not the storage service,
is what makes one aggregator slow (SMLT §3.3). ``ThrottledStore`` wraps any store and makes
each request take at least ``size / mbps`` seconds, so that schemes can be compared on one
machine under the bandwidth a function would have. It shares the wrapped store's counters.
"""

from __future__ import annotations

import time
from typing import Self

from faasml.exceptions import ConfigError
from faasml.sync.stores._base import Store


class ThrottledStore(Store):
    """``inner`` with every transfer held to at least ``bytes / (mbps * 1e6)`` seconds."""

    def __init__(self, inner: Store, mbps: float) -> None:
        if not mbps > 0:
            raise ConfigError(f"the value of mbps is {mbps}, but must be > 0")
        super().__init__(inner.url)
        self.inner = inner
        self.mbps = mbps
        self.stats = inner.stats  # one set of counters: the inner store's extra requests too
        self._stats_lock = inner._stats_lock
        self.max_poll_s = inner.max_poll_s

    @classmethod
    def from_url(cls, url: str) -> Self:
        raise ConfigError("a throttled store wraps an open store: ThrottledStore(store, mbps)")

    def transfer(self, size: int) -> None:
        """Spend the time ``size`` bytes take over the link, for work done outside the store
        API (the parameter server's push and pull)."""
        time.sleep(size / (self.mbps * 1e6))

    def _hold(self, start: float, size: int) -> None:
        left = start + size / (self.mbps * 1e6) - time.perf_counter()
        if left > 0:
            time.sleep(left)

    def _put(self, key: str, value: bytes) -> None:
        start = time.perf_counter()
        self.inner._put(key, value)
        self._hold(start, len(value))

    def _get(self, key: str) -> bytes | None:
        start = time.perf_counter()
        value = self.inner._get(key)
        self._hold(start, len(value) if value is not None else 0)
        return value

    def _delete_prefix(self, prefix: str) -> int:
        return self.inner._delete_prefix(prefix)

    def close(self) -> None:
        self.inner.close()
