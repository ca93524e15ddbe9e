"""The run directory and its record, which the runtime writes; the report, curves and plots
in it are written by ``faasml.reports.run_outputs`` (given to the run as its ``outputs``).

Layout: ``record.json`` (the whole state, rewritten atomically after every segment, so a
resumed run starts from it), ``report.md`` (plan against actual time and bill, best
configuration, restarts, failures), ``curves/trial-<i>.csv`` (loss curves in the format the
training simulator reads, ``faasml.sim.curves``), ``plots/*.png`` (loss curves, spend over
time, allocation over time; needs matplotlib) and ``objects/`` (the embedded object store:
data partitions and checkpoints).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faasml._files import write_atomic
from faasml._validate import shown
from faasml.exceptions import ConfigError, RecordError
from faasml.runtime.record.codec import record_from_json, record_to_json
from faasml.runtime.record.records import KINDS, RunRecord
from faasml.runtime.record.run_lock import LOCK_NAME, refuse_if_held


class RunDir:
    """One run's folder."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def record_path(self) -> Path:
        return self.path / "record.json"

    def check_new(self, *, force: bool = False) -> None:
        """Refuse a folder a new run would write over: a file, a folder another process runs
        in now (even with ``force``), a folder holding a run (unless ``force``), a non-empty
        folder that holds none (unless ``force``), or an unwritable place. Called before
        anything is planned, by ``faasml tune|train`` and ``Tuner.fit``."""
        path = self.path
        if path.exists() and not path.is_dir():
            raise ConfigError(
                f"the run directory {path} is a file; name a folder that does not exist yet "
                "(or an empty one)"
            )
        parent = next((p for p in (path, *path.parents) if p.exists()), Path("."))
        if not parent.is_dir():
            raise ConfigError(f"the run directory {path} cannot be made: {parent} is a file")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ConfigError(f"the run directory {path} cannot be written: {parent} is read-only")
        if not path.is_dir():
            return
        refuse_if_held(path)  # a run filling it now: say so, even with force
        if force:
            return
        if self.record_path.exists():
            status, kind = _peek(self.record_path)
            advice = (
                "choose another --run-dir"
                if status in ("finished", "target-missed")
                else f"continue it with: faasml resume {path}; or choose another --run-dir"
            )
            raise ConfigError(
                f"the run directory {path} already holds a {kind}run ({status}); its record "
                f"and report would be overwritten: {advice} (or pass --force to overwrite it)"
            )
        if any(entry.name != LOCK_NAME for entry in path.iterdir()):
            raise ConfigError(
                f"the run directory {path} is not empty and holds no run; choose a new or "
                "empty folder (or pass --force to write into it)"
            )

    def write_record(self, record: RunRecord, *, durable: bool = True) -> None:
        """Write ``record.json`` atomically (temporary file, fsync, rename). ``durable=False``
        (the rewrites after segments): without the fsync (see ``write_atomic``), and compact
        (json's C encoder: the indented form is encoded in Python, milliseconds a segment)."""
        self.path.mkdir(parents=True, exist_ok=True)
        data = record_to_json(record)
        text = json.dumps(data, indent=1 if durable else None, default=_plain)
        write_atomic(self.record_path, text, durable=durable)

    def read_record(self) -> RunRecord:
        """The record of the run, migrated and validated (``record_json``); a missing,
        unreadable or damaged record raises a one-line ``ConfigError`` naming the file."""
        if not self.record_path.exists():
            raise ConfigError(f"{self.path} is not a run directory: it has no record.json")
        try:
            data = json.loads(self.record_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ConfigError(f"{self.record_path} is not valid JSON: {err}") from None
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
            problem = err.strerror if isinstance(err, OSError) else err
            raise ConfigError(f"cannot read {self.record_path}: {problem}") from None
        try:
            return record_from_json(data)
        except RecordError as err:
            raise RecordError(f"{self.record_path} is not a usable run record: {err}") from None

    def sync_dir(self) -> Path:
        """Where the parameter store keeps gradients: tmpfs when there is one."""
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
        digest = hashlib.sha1(str(self.path.resolve()).encode()).hexdigest()[:12]
        folder = base / f"faasml-sync-{digest}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def _peek(record: Path) -> tuple[str, str]:
    """(status, "kind ") of a record, for a message; unknown parts read as 'unknown'."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return "unreadable record", ""
    if not isinstance(data, Mapping):
        return "unreadable record", ""
    kind, status = data.get("kind"), data.get("status", "unknown")
    return status if isinstance(status, str) else shown(status), f"{kind} " if kind in KINDS else ""


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to a run record")
