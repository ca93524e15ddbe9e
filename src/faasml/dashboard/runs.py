"""The runs a dashboard shows: the run directories under the folders it was given, found
afresh on every look (a run started after the dashboard appears), and each one's record."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from faasml.exceptions import ConfigError, FaasmlError
from faasml.runtime.record.run_dir import RunDir
from faasml.units import format_duration, format_money

DEPTH = 2
"""How deep under a folder given the dashboard looks for runs (``runs/<name>`` from the
project's folder)."""


@dataclass(frozen=True)
class RunEntry:
    """A run in the list: where it is and its state, or why its record cannot be read."""

    path: str
    name: str
    kind: str
    status: str
    trials: int
    bill: str
    elapsed: str
    updated: str
    error: str | None = None


def check_roots(roots: list[str]) -> list[str]:
    """The folders given, each checked to exist (one line naming the one that does not)."""
    for root in roots:
        if not Path(root).is_dir():
            what = "is a file, not a folder" if Path(root).exists() else "does not exist"
            raise ConfigError(
                f"{root} {what}; name a run directory (it holds record.json) or a folder of them"
            )
    return roots


def find_runs(roots: list[str]) -> list[str]:
    """The run directories at or under ``roots`` (up to ``DEPTH`` folders down), as paths
    joined to the root given, in order; each named once."""
    found: list[str] = []
    seen: set[Path] = set()

    def visit(folder: Path, depth: int) -> None:
        if (folder / "record.json").is_file():
            key = folder.resolve()
            if key not in seen:
                seen.add(key)
                found.append(os.path.normpath(folder))
            return
        if depth == 0:
            return
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            return
        for child in children:
            if not child.name.startswith("."):
                visit(child, depth - 1)

    for root in roots:
        visit(Path(root), DEPTH)
    return found


def no_runs_line(roots: list[str]) -> str:
    where = ", ".join(roots)
    return (
        f"no run directory (a folder holding record.json) in {where} or {DEPTH} folders "
        "below; start one with: faasml tune JOB --run-dir DIR"
    )


def updated_at(path: str) -> str:
    """When the run last wrote its record (UTC), or '' when it cannot be told."""
    try:
        mtime = RunDir(path).record_path.stat().st_mtime
    except OSError:
        return ""
    return datetime.fromtimestamp(mtime, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def run_entry(path: str) -> RunEntry:
    """The list's line for the run in ``path`` (a damaged record: its error, in one line)."""
    try:
        record = RunDir(path).read_record()
    except FaasmlError as err:
        return RunEntry(path, path, "", "unreadable", 0, "", "", updated_at(path), str(err))
    return RunEntry(
        path=path,
        name=record.job_name or path,
        kind=record.kind,
        status=record.status,
        trials=len(record.trials),
        bill=format_money(record.bill_usd()),
        elapsed=format_duration(record.elapsed_s),
        updated=updated_at(path),
    )
