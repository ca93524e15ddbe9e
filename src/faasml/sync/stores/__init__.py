"""Stores, looked up by URL scheme; an implementation is imported only when its scheme is used.

``open_store("embedded:///dev/shm/faasml-run")``, ``open_store("redis://127.0.0.1:6379/0")``...
"""

from __future__ import annotations

from urllib.parse import urlsplit

from faasml.exceptions import UnknownNameError
from faasml.registry import Registry
from faasml.sync.stores._base import Store, StoreStats

STORES: Registry[type[Store]] = Registry("store")
"""URL scheme -> Store class ("module:Class" strings until first use)."""
STORES.register("embedded", "faasml.sync.stores.embedded:EmbeddedStore")
STORES.register("ps", "faasml.sync.param_server:ParameterServerStore")
STORES.register("vm-ps", "faasml.sync.param_server:ParameterServerStore")  # the catalog's name
STORES.register("redis", "faasml.sync.stores.redis:RedisStore")
STORES.register("rediss", "faasml.sync.stores.redis:RedisStore")
STORES.register("memcached", "faasml.sync.stores.memcached:MemcachedStore")
STORES.register("s3", "faasml.sync.stores.s3:S3Store")
STORES.register("dynamodb", "faasml.sync.stores.dynamodb:DynamoDBStore")
STORES.register("infinicache", "faasml.sync.stores.infinicache:InfiniCacheStore")


STORAGE_OF_SCHEME = {
    "embedded": "embedded",
    "ps": "vm-ps",
    "vm-ps": "vm-ps",
    "redis": "redis",
    "rediss": "redis",
    "memcached": "memcached",
    "s3": "s3",
    "dynamodb": "dynamodb",
    "infinicache": "infinicache",
}
"""URL scheme -> the catalog storage service that prices such a store."""


def is_store_url(value: str) -> bool:
    return "://" in value


def storage_name(url: str) -> str:
    """The catalog storage service a store URL is priced as (``redis://...`` -> ``redis``)."""
    scheme = urlsplit(url).scheme
    if scheme not in STORAGE_OF_SCHEME:
        raise UnknownNameError(  # the URL itself is not echoed: it may hold a password
            f"the store URL has an unknown scheme {scheme!r}; choose one of: "
            + ", ".join(f"{name}://" for name in sorted(STORAGE_OF_SCHEME))
        )
    return STORAGE_OF_SCHEME[scheme]


def check_store_url(url: str) -> None:
    """Refuse, without connecting, a URL its store would refuse for its form (credentials in a
    Redis URL, an unknown InfiniCache option); ``ConfigError`` says which rule."""
    STORES.get(urlsplit(url).scheme or url).check_url(url)


def open_store(url: str) -> Store:
    """Open the store a URL names; an unknown scheme lists the known ones."""
    scheme = urlsplit(url).scheme or url
    return STORES.get(scheme).from_url(url)


__all__ = [
    "STORAGE_OF_SCHEME",
    "STORES",
    "Store",
    "StoreStats",
    "check_store_url",
    "is_store_url",
    "open_store",
    "storage_name",
]
