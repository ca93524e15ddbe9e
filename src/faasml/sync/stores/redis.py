"""Redis as the parameter store (SMLT §4.3): ``redis://host:port/db`` (``rediss://`` for TLS).

Start one: ``redis-server --bind 127.0.0.1 --port 6379 --save ''`` (Debian package
``redis-server``), or ElastiCache / any Redis endpoint. A password comes from the environment
variable ``REDISCLI_AUTH`` (the one redis-cli reads), never from the URL, so it cannot end up in
a job file, run record or log. SET and GET are atomic; ``delete(prefix)`` is SCAN + UNLINK.
Billed by the hour (ElastiCache node) in the catalog; requests and bytes are still counted.
"""

from __future__ import annotations

import os
import re
from typing import Any, Self
from urllib.parse import urlsplit

from faasml._imports import optional_import
from faasml.exceptions import ConfigError
from faasml.sync.stores._base import Store
from faasml.sync.stores._service import with_retries

_GLOB = re.compile(r"([*?\[\]\\])")


class RedisStore(Store):
    """Values as Redis strings; retries with backoff; errors name the endpoint."""

    max_poll_s = 0.005

    def __init__(self, url: str, host: str, port: int, db: int, tls: bool) -> None:
        super().__init__(url)
        redis = optional_import("redis", "aws")
        optional_import("redis.backoff", "aws")
        optional_import("redis.retry", "aws")
        self.endpoint = f"{host}:{port}/{db}"
        self._errors: tuple[type[BaseException], ...] = (
            redis.exceptions.ConnectionError,
            redis.exceptions.TimeoutError,
        )
        self._client: Any = redis.Redis(
            host=host,
            port=port,
            db=db,
            ssl=tls,
            password=os.environ.get("REDISCLI_AUTH"),
            socket_connect_timeout=5,
            socket_timeout=60,
            health_check_interval=30,
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),  # ours below, once
        )

    @classmethod
    def check_url(cls, url: str) -> None:
        parts = urlsplit(url)
        if parts.password or parts.username:
            raise ConfigError(
                "a Redis URL must not carry credentials (they would be recorded); "
                "set the password in the REDISCLI_AUTH environment variable"
            )
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise ConfigError(f"Redis URL {url!r} must look like redis://host:port/db")
        path = parts.path.strip("/") or "0"
        if not path.isdigit():
            raise ConfigError(f"Redis URL {url!r} names database {path!r}, but must be a number")

    @classmethod
    def from_url(cls, url: str) -> Self:
        cls.check_url(url)
        parts = urlsplit(url)
        path = parts.path.strip("/") or "0"
        host = parts.hostname or ""
        return cls(url, host, parts.port or 6379, int(path), parts.scheme == "rediss")

    def _retry(self, call: Any) -> Any:
        return with_retries(call, endpoint=f"redis {self.endpoint}", transient=self._errors)

    def _put(self, key: str, value: bytes) -> None:
        self._retry(lambda: self._client.set(key, value))

    def _get(self, key: str) -> bytes | None:
        value = self._retry(lambda: self._client.get(key))
        return None if value is None else bytes(value)

    def _delete_prefix(self, prefix: str) -> int:
        pattern = _GLOB.sub(r"\\\1", prefix) + "*"
        keys: list[bytes] = self._retry(
            lambda: list(self._client.scan_iter(match=pattern, count=1000))
        )
        self._count_extra(lists=1)
        removed = 0
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            removed += int(self._retry(lambda batch=batch: self._client.unlink(*batch)))
        return removed

    def close(self) -> None:
        self._client.close()
