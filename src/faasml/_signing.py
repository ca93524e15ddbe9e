"""Signing what faasml pickles for a user, so that only what this user packed is unpickled.

A training function travels pickled (``workloads.function_model``) and stays in the run's
record, from which ``faasml resume`` loads it. Unpickling runs code, so a pickle is loaded
only with a valid HMAC-SHA256 signature under a key of the user's own, kept outside every run
directory: ``$XDG_CONFIG_HOME/faasml/signing.key`` (``~/.config`` without it), made on first
use, readable by the user alone (0600). A record copied from elsewhere, or edited, does not
carry this user's signature and is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from faasml.exceptions import ConfigError

__all__ = ["key_path", "sign", "unsigned_reason"]

KEY_NAME = "signing.key"


def key_path() -> Path:
    """Where the user's signing key is (or will be made)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "faasml" / KEY_NAME


def _read_key(path: Path) -> bytes | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        return b""
    return key


def _key() -> bytes:
    """The user's key, made (0600, in a folder of 0700) on first use."""
    path = key_path()
    key = _read_key(path)
    if key == b"":
        raise ConfigError(f"the signing key {path} is not a hex key; remove it to make a new one")
    if key is not None:
        return key
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{KEY_NAME}.{secrets.token_hex(6)}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(handle, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(32) + "\n")
        with contextlib.suppress(FileExistsError):  # another process made one meanwhile
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return _key()


def sign(data: bytes) -> str:
    """The hex HMAC-SHA256 of ``data`` under the user's key."""
    return hmac.new(_key(), data, hashlib.sha256).hexdigest()


def unsigned_reason(data: bytes, signature: object) -> str | None:
    """None where ``signature`` is ``data``'s under the user's key, else why it is not."""
    if not isinstance(signature, str) or not signature:
        return "it is not signed"
    key = _read_key(key_path())
    if key is None:
        return f"this user has no signing key ({key_path()} does not exist)"
    if not key:
        return f"this user's signing key {key_path()} is not a hex key"
    expected = hmac.new(key, data, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        return f"it is not signed with this user's key ({key_path()})"
    return None
