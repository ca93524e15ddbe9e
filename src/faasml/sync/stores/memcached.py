"""Memcached as the parameter store: ``memcached://host:port``.

Start one with an item size large enough for a model's shards:
``memcached -l 127.0.0.1 -p 11211 -I 128m -m 2048`` (Debian package ``memcached``). The store
reads the server's ``item_size_max`` and splits larger values into chunks (see ``_service``),
so a default ``-I 1m`` server works too, with more requests. ``delete(prefix)`` lists keys with
``lru_crawler metadump all`` (memcached >= 1.4.31). Memcached is a cache: under memory pressure
it may evict values, so give it ``-m`` well above what a round holds. Billed by the hour
(ElastiCache node) in the catalog; requests and bytes are counted.
"""

from __future__ import annotations

import socket
from typing import Any, Self
from urllib.parse import quote, unquote, urlsplit

from faasml._imports import optional_import
from faasml.exceptions import ConfigError, StoreUnavailableError
from faasml.sync.stores._base import Store
from faasml.sync.stores._service import CHUNK_MARK, join, split, with_retries

_ITEM_OVERHEAD = 4096  # item header and key, kept free of the server's item size


class MemcachedStore(Store):
    """Values as memcached items, chunked above the server's item size; keys URL-escaped."""

    max_poll_s = 0.005

    def __init__(self, url: str, host: str, port: int) -> None:
        super().__init__(url)
        pymemcache = optional_import("pymemcache.client.base", "aws")
        self.host, self.port = host, port
        self.endpoint = f"memcached {host}:{port}"
        self._errors: tuple[type[BaseException], ...] = (
            OSError,
            optional_import("pymemcache.exceptions", "aws").MemcacheUnexpectedCloseError,
        )
        self._client: Any = pymemcache.PooledClient(  # thread-safe: a pool of connections
            (host, port), connect_timeout=5, timeout=60, no_delay=True
        )
        settings = self._retry(lambda: self._client.stats("settings"))
        self.item_limit = int(settings.get(b"item_size_max", 1 << 20)) - _ITEM_OVERHEAD

    @classmethod
    def from_url(cls, url: str) -> Self:
        parts = urlsplit(url)
        if parts.scheme != "memcached" or not parts.hostname:
            raise ConfigError(f"Memcached URL {url!r} must look like memcached://host:port")
        return cls(url, parts.hostname, parts.port or 11211)

    def _retry(self, call: Any) -> Any:
        return with_retries(call, endpoint=self.endpoint, transient=self._errors)

    @staticmethod
    def _key(key: str) -> str:
        # memcached keys: at most 250 bytes, no spaces or control characters.
        escaped = quote(key, safe="/-_.~=+,@#")
        if len(escaped) > 250:
            raise ConfigError(
                f"key {key[:60]!r}... is {len(escaped)} bytes once escaped, but memcached "
                "allows at most 250"
            )
        return escaped

    def _raw_set(self, key: str, value: bytes) -> None:
        stored = self._retry(lambda: self._client.set(self._key(key), value, noreply=False))
        if not stored:
            raise StoreUnavailableError(f"{self.endpoint} refused to store {key!r}")

    def _raw_get(self, key: str) -> bytes | None:
        value = self._retry(lambda: self._client.get(self._key(key)))
        return None if value is None else bytes(value)

    def _put(self, key: str, value: bytes) -> None:
        head, chunks = split(key, value, self.item_limit)
        for chunk, part in chunks:
            self._raw_set(chunk, part)
        self._raw_set(key, head)
        self._count_extra(puts=len(chunks))

    def _get(self, key: str) -> bytes | None:
        value, reads = join(key, lambda: self._raw_get(key), self._raw_get)
        self._count_extra(gets=reads)
        return value

    def _keys(self) -> list[str]:
        """Every key the server holds (``lru_crawler metadump all``), unescaped."""

        def dump() -> list[str]:
            with socket.create_connection((self.host, self.port), timeout=60) as sock:
                sock.sendall(b"lru_crawler metadump all\r\n")
                data = bytearray()
                while not data.endswith(b"END\r\n"):
                    block = sock.recv(1 << 16)
                    if not block:
                        raise ConnectionError("memcached closed the metadump connection")
                    data += block
                    if data.startswith((b"BUSY", b"ERROR", b"CLIENT_ERROR")):
                        raise ConnectionError(data.decode(errors="replace").strip())
            keys = []
            for line in data.decode().splitlines():
                if line.startswith("key="):
                    keys.append(unquote(unquote(line.split(" ", 1)[0][4:])))
            return keys

        # One crawler runs at a time: concurrent callers get BUSY and wait their turn.
        keys: list[str] = with_retries(
            dump,
            endpoint=self.endpoint,
            transient=self._errors,
            attempts=60,
            first_delay_s=0.005,
            max_delay_s=0.25,
        )
        return keys

    def _delete_prefix(self, prefix: str) -> int:
        keys = [k for k in self._keys() if k.startswith(prefix)]
        self._count_extra(lists=1, deletes=max(len(keys) - 1, 0))
        removed = 0
        for key in keys:
            if self._retry(lambda key=key: self._client.delete(self._key(key), noreply=False)):
                removed += CHUNK_MARK not in key  # chunks are part of their key's value
        return removed

    def close(self) -> None:
        self._client.close()
