"""What the service-backed stores share: retries with backoff, and values split into chunks.

Retries: a transient failure (connection refused or reset, a timeout) is retried with
exponential backoff; when the attempts run out the caller gets ``StoreUnavailableError``
naming the endpoint. Nothing here logs or formats credentials.

Chunks: a store whose items are limited in size (DynamoDB's 400 KB, Memcached's ``-I``) keeps a
large value as chunk items written first under ``<key>#~<version>/<i>`` and then one small head
item under ``<key>`` that names the version. A reader reads the head, then the chunks; a put
never changes the chunks of an existing version, so a reader sees a whole value (if an old
version's chunks vanish under it, it reads the new head again). Chunk keys start with their
key, so ``delete(prefix)`` removes them with it.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from faasml.exceptions import StoreUnavailableError

T = TypeVar("T")

CHUNK_MARK = "#~"
_INLINE, _CHUNKED = b"\x00", b"\x01"


def with_retries(
    call: Callable[[], T],
    *,
    endpoint: str,
    transient: tuple[type[BaseException], ...],
    attempts: int = 4,
    first_delay_s: float = 0.05,
    max_delay_s: float = 2.0,
) -> T:
    """``call()``, retried on ``transient`` errors with doubling, jittered delays (at most
    ``max_delay_s``); then StoreUnavailableError naming ``endpoint``."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except transient as err:
            if attempt == attempts:
                raise StoreUnavailableError(
                    f"store at {endpoint} is unavailable after {attempts} attempts: "
                    f"{type(err).__name__}: {err}"
                ) from err
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, max_delay_s)
    raise AssertionError("unreachable")


def chunk_key(key: str, version: str, index: int) -> str:
    return f"{key}{CHUNK_MARK}{version}/{index}"


def chunk_prefix(key: str, version: str) -> str:
    return f"{key}{CHUNK_MARK}{version}/"


def split(key: str, value: bytes, limit: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The head item and the chunk items (key, bytes) that hold ``value`` in items of at most
    ``limit`` bytes; no chunks when the value fits inline."""
    if len(value) + 1 <= limit:
        return _INLINE + value, []
    version = uuid.uuid4().hex[:16]
    chunks = [
        (chunk_key(key, version, i), value[start : start + limit])
        for i, start in enumerate(range(0, len(value), limit))
    ]
    head = {"version": version, "chunks": len(chunks), "size": len(value)}
    return _CHUNKED + json.dumps(head).encode(), chunks


def head_version(head: bytes) -> tuple[str, int] | None:
    """(version, chunk count) of a chunked head; None for an inline value."""
    if head[:1] != _CHUNKED:
        return None
    info = json.loads(head[1:])
    return str(info["version"]), int(info["chunks"])


def join(
    key: str, read_head: Callable[[], bytes | None], read_chunk: Callable[[str], bytes | None]
) -> tuple[bytes | None, int]:
    """The whole value under ``key`` (None if missing) and how many chunks were read."""
    reads = 0
    for _ in range(20):
        head = read_head()
        if head is None:
            return None, reads
        version = head_version(head)
        if version is None:
            return head[1:], reads
        parts: list[bytes] = []
        for index in range(version[1]):
            part = read_chunk(chunk_key(key, version[0], index))
            reads += 1
            if part is None:  # overwritten meanwhile: read the new head
                break
            parts.append(part)
        else:
            return b"".join(parts), reads
    raise StoreUnavailableError(f"value under {key!r} kept changing while it was read")
