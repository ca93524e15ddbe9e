"""Where a segment's workers synchronise: the store configured for its allocation's storage, a
parameter server or InfiniCache deployment the coordinator starts for it, else the default."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from faasml.types import Allocation


class SyncStores:
    """The stores of a run's allocations, and the servers started for them (stopped at close)."""

    def __init__(self, default_url: str, stores: Mapping[str, str] | None = None) -> None:
        """``default_url`` is the store gradients go through; ``stores`` maps catalog storage
        names to the stores of those names, for allocations the planner put on them."""
        self._default_url = default_url
        self._stores = dict(stores or {})
        self._server: Any = None
        self._caches: dict[str, Any] = {}
        """Storage name -> the InfiniCache deployment started for it (billed at close)."""

    def url(self, allocation: Allocation) -> str:
        """The store of ``allocation``: the one configured under its storage's name, else a
        parameter-server process this coordinator starts on loopback for 'param-server' (the
        VM-PS case), else the default store."""
        configured = self._stores.get(allocation.storage)
        if configured is not None and configured.startswith("infinicache:"):
            return self._cache_url(allocation.storage, configured)
        if configured is not None:
            return configured
        if allocation.scheme != "param-server":
            return self._default_url
        if self._server is None:
            from faasml.sync.param_server import ParameterServer

            self._server = ParameterServer().start()
        return str(self._server.url)

    def _cache_url(self, name: str, url: str) -> str:
        """The URL workers join: of the InfiniCache deployment this coordinator started for
        ``url`` (one without a host asks for one; stopped and billed at close)."""
        from faasml.sync.stores.infinicache.runs import starts_deployment

        if not starts_deployment(url):
            return url
        if name not in self._caches:
            from faasml.runtime.platforms.infinicache import start_infinicache

            self._caches[name] = start_infinicache(url)
        return str(self._caches[name].url)

    def cache_bills(self) -> list[dict[str, float]]:
        """The bills the running InfiniCache deployments have run up so far."""
        return [cache.bill() for cache in self._caches.values()]

    def close(self, bill: Callable[[str, dict[str, float]], None]) -> None:
        """Stop the parameter server and the deployments, handing ``bill`` each deployment's
        name and final bill as it stops."""
        if self._server is not None:
            self._server.stop()
            self._server = None
        for name, cache in list(self._caches.items()):
            cache.close()  # every node invocation ends and is billed
            bill(name, cache.bill())
            del self._caches[name]
