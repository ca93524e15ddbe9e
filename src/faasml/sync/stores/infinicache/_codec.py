"""Erasure coding of objects into d data + p parity chunks (InfiniCache §4.1.1, RS code).

The Reed–Solomon codec is zfec's (a maintained C implementation of Rizzo's classic codec,
used by Tahoe-LAFS); nothing here does arithmetic on the field. An object of ``size`` bytes
is cut into d equal blocks of ``chunk_size = ceil(size / d)`` bytes (the last one padded with
zeros; an empty object gets one-byte blocks), and zfec adds p parity blocks. Any d of the
d + p chunks give the object back. Every chunk carries a CRC-32 and the whole object a
BLAKE2b digest, so a stale, torn or corrupt chunk is never decoded into wrong bytes.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from faasml._imports import optional_import

MAX_CHUNKS = 256
"""zfec (GF(2^8)) codes at most 256 chunks in all."""


class CodingError(ValueError):
    """Chunks that cannot give the object back (too few, or a digest that does not match)."""


@dataclass(frozen=True)
class Encoded:
    """An object coded into chunks: chunk i is data for i < d, parity for i >= d."""

    size: int
    chunk_size: int
    digest: str
    chunks: tuple[bytes, ...]
    crcs: tuple[int, ...]


def chunk_size(size: int, data: int) -> int:
    """Bytes of each chunk of a ``size``-byte object coded with ``data`` data chunks."""
    return max(1, -(-size // data))


def digest(value: bytes) -> str:
    return hashlib.blake2b(value, digest_size=16).hexdigest()


def crc(chunk: bytes) -> int:
    return zlib.crc32(chunk)


def _zfec() -> Any:
    return optional_import("zfec", "infinicache")


@lru_cache(maxsize=32)
def _encoder(data: int, total: int) -> Any:
    return _zfec().Encoder(data, total)


def _blocks(value: bytes, data: int) -> list[bytes]:
    size = chunk_size(len(value), data)
    padded = value + b"\x00" * (size * data - len(value))
    view = memoryview(padded)
    return [bytes(view[i * size : (i + 1) * size]) for i in range(data)]


def encode(value: bytes, data: int, parity: int) -> Encoded:
    """The d + p chunks of ``value`` with their CRCs and the object's digest."""
    blocks = _blocks(value, data)
    chunks = tuple(_encoder(data, data + parity).encode(blocks)) if parity else tuple(blocks)
    return Encoded(
        size=len(value),
        chunk_size=len(blocks[0]),
        digest=digest(value),
        chunks=chunks,
        crcs=tuple(crc(c) for c in chunks),
    )


def _data_blocks(chunks: dict[int, bytes], data: int, parity: int) -> list[bytes]:
    if len(chunks) < data:
        raise CodingError(f"{len(chunks)} chunks cannot give back an object coded with d={data}")
    if all(i in chunks for i in range(data)):
        return [chunks[i] for i in range(data)]
    indices = tuple(sorted(chunks)[:data])
    decoder = _zfec().Decoder(data, data + parity)
    return list(decoder.decode(tuple(chunks[i] for i in indices), indices))


def decode(chunks: dict[int, bytes], data: int, parity: int, size: int, want: str) -> bytes:
    """The object from any d chunks (index -> bytes); CodingError unless its digest is
    ``want``."""
    value = b"".join(_data_blocks(chunks, data, parity))[:size]
    if digest(value) != want:
        raise CodingError("the decoded object does not match its digest")
    return value


def rebuild(chunks: dict[int, bytes], data: int, parity: int, missing: list[int]) -> list[bytes]:
    """Chunks ``missing`` recomputed from any d others (repair, §4.1.2)."""
    blocks = _data_blocks(chunks, data, parity)
    parity_wanted = [i for i in missing if i >= data]
    parity_chunks = (
        dict(
            zip(
                parity_wanted,
                _encoder(data, data + parity).encode(blocks, parity_wanted),
                strict=True,
            )
        )
        if parity_wanted
        else {}
    )
    return [blocks[i] if i < data else parity_chunks[i] for i in missing]
