"""One process at a time per run directory: an exclusive lock held for the life of a run.

``faasml tune|train|resume`` and ``Tuner.fit`` hold ``run.lock`` in the run directory
(``fcntl.flock``) while they plan and run; a second one on the same directory is refused in
one line naming the holder (pid, host, command, since when: written into the lock file). The
operating system releases the lock when the holder dies, however it dies, so a killed run
never leaves a stale lock. Within one process the lock is re-entrant (``BaseRun.execute``
takes it again under the command's). A Ctrl-C while a run holds its lock leaves as
``RunInterrupted``, which names the run directory; a full disk as the ``OSError`` it is, with
the file it was writing (``disk_full``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from faasml.exceptions import ConfigError

__all__ = [
    "DISK_FULL",
    "LOCK_NAME",
    "RunDirInUseError",
    "RunInterrupted",
    "disk_full",
    "interrupting",
    "interruption",
    "last_run_dir",
    "lock_run",
]

LOCK_NAME = "run.lock"
"""The lock file in a run directory (kept after the run: an unlocked file locks nothing)."""

DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""Write errors that say the disk (or the user's share of it, or a file size limit) is full."""

_HELD: dict[Path, tuple[int, int]] = {}
"""Run directories this process holds: resolved path -> (file descriptor, depth)."""
_LAST: list[Path] = []
"""The run directory this process locked last (for the line a full disk prints)."""


class RunDirInUseError(ConfigError):
    """Another process holds the run directory's lock; the message names it."""


class RunInterrupted(KeyboardInterrupt):
    """A Ctrl-C stopped the run in ``run_dir`` (its record left resumable)."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a write that found the disk full."""
    return isinstance(err, OSError) and err.errno in DISK_FULL


def interrupting(err: BaseException) -> bool:
    """Whether ``err`` stops a run that can be resumed as it is: a Ctrl-C or a full disk."""
    return isinstance(err, KeyboardInterrupt) or disk_full(err)


def interruption(err: BaseException) -> str:
    """What stopped the run, for its record: 'Ctrl-C' or 'disk full writing FILE'."""
    if isinstance(err, KeyboardInterrupt):
        return "Ctrl-C"
    filename = getattr(err, "filename", None)
    return f"disk full writing {filename}" if filename else f"disk full ({err})"


def last_run_dir() -> Path | None:
    """The run directory this process locked last, held or not (None before any)."""
    return _LAST[-1] if _LAST else None


@contextlib.contextmanager
def lock_run(run_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold ``run_dir``'s lock (made with the folder if need be) for the block; a Ctrl-C in
    the block leaves as ``RunInterrupted(run_dir)``."""
    path = Path(run_dir)
    key = path.resolve()
    if key in _HELD:
        fd, depth = _HELD[key]
        _HELD[key] = (fd, depth + 1)
    else:
        _HELD[key] = (_acquire(path), 1)
    _LAST[:] = [path]
    try:
        yield path
    except RunInterrupted:
        raise
    except KeyboardInterrupt:
        raise RunInterrupted(path) from None
    finally:
        fd, depth = _HELD[key]
        if depth > 1:
            _HELD[key] = (fd, depth - 1)
        else:
            del _HELD[key]
            os.close(fd)  # releases the lock


def refuse_if_held(run_dir: str | os.PathLike[str]) -> None:
    """``RunDirInUseError`` where another process holds ``run_dir``'s lock: a run started
    beside it is told so, not that the folder it is filling holds no run yet."""
    path = Path(run_dir)
    lock = path / LOCK_NAME
    if path.resolve() in _HELD or not lock.is_file():
        return
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return  # gone meanwhile: nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(path, _holder(fd)) from None
    finally:
        os.close(fd)  # releases a lock it took


def _in_use(path: Path, holder: str) -> RunDirInUseError:
    return RunDirInUseError(
        f"the run directory {path} is in use by {holder}; wait for it to end (or stop "
        "it), then resume it with 'faasml resume', or choose another --run-dir"
    )


def _acquire(path: Path) -> int:
    """Open, lock and sign ``path``'s lock file (``RunDirInUseError``: another process has it)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise ConfigError(f"cannot lock the run directory {path}: {err.strerror or err}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise _in_use(path, holder) from None
    except BaseException:
        os.close(fd)
        raise
    stamp = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": _command(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with contextlib.suppress(OSError):  # who holds it is for messages only
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(stamp) + "\n").encode(), 0)
    return fd


def _command() -> str:
    """This process's command line, any password in it (a store's URL) redacted."""
    from faasml.job.layers import redact_url

    words = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv else []
    shown = []
    for word in words:
        flag, equals, value = word.partition("=") if word.startswith("-") else ("", "", word)
        shown.append(flag + equals + redact_url(value))
    return " ".join(shown)


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says: 'pid P on HOST (COMMAND) since T'."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict) or "pid" not in data:
        return "another process (it has not said which yet)"
    command = str(data.get("command", "")).strip()
    return (
        f"pid {data.get('pid')} on {data.get('host', '?')}"
        + (f" ({command})" if command else "")
        + f" since {data.get('since', '?')}"
    )
