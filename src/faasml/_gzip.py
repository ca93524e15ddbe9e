"""Text from a gzip file, bounded as it streams: a gzip bomb (a small file that decompresses to
gigabytes) is refused before it fills memory, not after.

Two bounds hold while the bytes are read, each refused with the given ConfigError subclass:
no line longer than ``MAX_LINE_BYTES`` (a reader holds a whole line, and a bomb is often one
endless line, so even the first line, a header, is never read whole), and no more than
``MAX_RATIO`` × the file's size in all (data and traces compress a few times; a bomb, a
thousand times or more), with ``FLOOR_BYTES`` allowed whatever the file's size.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

from faasml.exceptions import ConfigError

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line a gzip text file may hold: wider than any row of the formats faasml reads."""
MAX_RATIO = 100
"""Most decompressed bytes per byte of the file: text data compresses far less than this."""
FLOOR_BYTES = 64 * 1024 * 1024
"""Decompressed bytes allowed whatever the ratio (a small file of very repetitive rows)."""
_CHUNK = 1024 * 1024


class _CheckedGzip(io.RawIOBase):
    """The decompressed bytes of ``path``, checked against the bounds chunk by chunk."""

    def __init__(self, path: Path, error: type[ConfigError]) -> None:
        super().__init__()
        self._path, self._error = path, error
        self._limit = max(FLOOR_BYTES, MAX_RATIO * path.stat().st_size)
        self._file = gzip.open(path, "rb")  # noqa: SIM115 (closed in close())
        self._total = 0
        self._line = 0
        """Bytes since the last line break."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            data = self._file.read(min(len(buffer), _CHUNK))
        except (OSError, EOFError, zlib.error) as err:
            raise self._error(f"{self._path} is not a readable gzip file ({err})") from None
        size = len(data)
        buffer[:size] = data
        self._total += size
        cut = data.rfind(b"\n")
        self._line = self._line + size if cut < 0 else size - cut - 1
        if self._line > MAX_LINE_BYTES:
            raise self._error(
                f"{self._path} has a line longer than {MAX_LINE_BYTES:,} bytes once "
                "decompressed, but lines may be at most that long (a gzip bomb?)"
            )
        if self._total > self._limit:
            raise self._error(
                f"{self._path} decompresses to more than {self._limit:,} bytes, but may "
                f"decompress to at most {MAX_RATIO} × its size of "
                f"{self._path.stat().st_size:,} bytes (or {FLOOR_BYTES:,}; a gzip bomb?)"
            )
        return size

    def close(self) -> None:
        self._file.close()
        super().close()


def open_gzip_text(path: Path, error: type[ConfigError]) -> io.TextIOWrapper:
    """``path`` (a gzip file) as UTF-8 text whose reading stops, with ``error``, past a bound.
    OSError when the file cannot be opened, as ``open`` raises it."""
    return io.TextIOWrapper(io.BufferedReader(_CheckedGzip(path, error)), encoding="utf-8")
