"""The embedded store: one file per key under a directory, no server to start.

``embedded:///dev/shm/faasml-run`` names the directory; ``embedded://`` alone picks a fresh one
on tmpfs (``/dev/shm``) where there is one, else in the temporary directory. Several processes
opened on the same URL share the values. A put writes a temporary file in the same directory
and renames it over the key's file (``os.replace`` is atomic on POSIX), so a reader sees the
whole old value, the whole new value, or nothing. Nothing is billed: the files live in the
machine's own memory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Self
from urllib.parse import quote, unquote, urlsplit

from faasml._files import naming
from faasml.exceptions import ConfigError
from faasml.sync.stores._base import Store

_TMP_MARK = "#tmp-"  # "#" is always escaped in key file names, so never clashes
_MAX_NAME = 240  # file names are at most 255 bytes on common file systems


def default_root() -> Path:
    """A fresh directory on tmpfs where there is one (``/dev/shm``), else under the temp dir."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix="faasml-store-", dir=base))


def _encode(key: str) -> str:
    # One flat file name per key: '/' and every other unsafe character are %-escaped, so a
    # key can never leave the directory and prefix order is kept for delete(prefix). "." is
    # escaped too (quote() never escapes it), so "." and ".." never name a directory.
    return quote(key, safe="-_~=+,@").replace(".", "%2E") or "%"


class EmbeddedStore(Store):
    """Files in one directory (tmpfs where there is one); atomic writes by rename."""

    max_poll_s = 0.005  # a missing-key GET is one failed open(): cheap to poll often

    def __init__(self, url: str, root: Path) -> None:
        super().__init__(url)
        self.root = root
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"embedded store directory {str(root)!r} cannot be created: {err.strerror}"
            ) from err

    @classmethod
    def from_url(cls, url: str) -> Self:
        parts = urlsplit(url)
        if parts.scheme != "embedded":
            raise ConfigError(f"store URL {url!r} must start with 'embedded://'")
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(
                f"store URL {url!r} names host {parts.netloc!r}, but the embedded store is on "
                "this machine only: use embedded:///absolute/dir"
            )
        if parts.path in ("", "/"):
            root = default_root()
            return cls(f"embedded://{root}", root)
        return cls(url, Path(unquote(parts.path)))

    def _path(self, key: str) -> Path:
        name = _encode(key)
        if len(name) > _MAX_NAME:
            raise ConfigError(
                f"key {key[:60]!r}... is {len(name)} characters once escaped, but the embedded "
                f"store allows at most {_MAX_NAME}"
            )
        return self.root / name

    def _put(self, key: str, value: bytes) -> None:
        target = self._path(key)
        tmp = self.root / f"{_TMP_MARK}{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as fh:
                fh.write(value)
            os.replace(tmp, target)
        except BaseException as err:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            if isinstance(err, OSError):  # a full disk says which file it was writing
                raise naming(err, target) from None
            raise

    def _get(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def _delete_prefix(self, prefix: str) -> int:
        encoded = _encode(prefix) if prefix else ""
        removed = 0
        for name in os.listdir(self.root):
            if name.startswith(_TMP_MARK) or not name.startswith(encoded):
                continue
            # %-escaping is a prefix code: the name starts with the escaped prefix exactly
            # when the key starts with the prefix.
            with contextlib.suppress(FileNotFoundError):  # another process removed it first
                os.unlink(self.root / name)
                removed += 1
        return removed

    def destroy(self) -> None:
        """Remove the whole directory (every key and the directory itself)."""
        shutil.rmtree(self.root, ignore_errors=True)
