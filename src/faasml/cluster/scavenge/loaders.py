"""Loaders of the idle-node event format and the jobs format (BFTrainer / FreeTrain's public
log replayer, converted to CSV).

- Events: (optionally gzip) CSV ``time_s,node,idle``: a row each time the main scheduler
  leaves ``node`` idle (1) or takes it back (0); seconds from the trace's start, in time
  order; every node starts busy. A row that repeats a node's state changes nothing.
- Jobs: CSV ``job,model,submit_s,min_nodes,max_nodes,scale_up_s,scale_down_s,total_samples,
  nodes,samples_per_s`` with an optional ``checkpoint_s``; ``nodes`` and ``samples_per_s``
  are space-separated lists (measured throughput at those node counts).

Every rule broken is a :class:`TraceFileError` naming the file, the line and the rule.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Iterator
from pathlib import Path

from faasml._gzip import open_gzip_text
from faasml.cluster.scavenge._records import IdleTrace, PoolChange, ScavengeJob, TraceFileError

EVENT_COLUMNS = ("time_s", "node", "idle")
JOB_COLUMNS = (
    "job",
    "model",
    "submit_s",
    "min_nodes",
    "max_nodes",
    "scale_up_s",
    "scale_down_s",
    "total_samples",
    "nodes",
    "samples_per_s",
)
JOB_OPTIONAL = ("checkpoint_s",)


def _open_text(path: Path) -> io.TextIOBase:
    try:
        with path.open("rb") as handle:
            head = handle.read(2)
            gzipped = head == b"\x1f\x8b"
            raw = b"" if gzipped else head + handle.read()
        text = None
        if gzipped:
            # Decompressed as it streams, within bounds: a gzip bomb is refused before it
            # fills memory.
            with open_gzip_text(path, TraceFileError) as stream:
                text = stream.read()
    except FileNotFoundError:
        raise TraceFileError(f"{path}: no such file") from None
    except OSError as err:
        raise TraceFileError(f"{path}: cannot be read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise TraceFileError(f"{path}: is not UTF-8 text") from None
    try:
        return io.StringIO(text if text is not None else raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TraceFileError(f"{path}: is not UTF-8 text") from None


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV whose header holds ``required``; an empty file is an error."""
    reader = csv.reader(_open_text(path))
    header = next(reader, None)
    if header is None or not any(cell.strip() for cell in header):
        raise TraceFileError(f"{path}: line 1: the file is empty, but must start with a header")
    names = [cell.strip() for cell in header]
    missing = [c for c in required if c not in names]
    if missing:
        raise TraceFileError(
            f"{path}: line 1: the header lacks column(s) {', '.join(missing)}; "
            f"it must have {','.join(required)}"
        )
    any_row = False
    for index, cells in enumerate(reader, start=2):
        if not cells or not any(c.strip() for c in cells):
            continue
        if len(cells) != len(names):
            raise TraceFileError(
                f"{path}: line {index}: has {len(cells)} fields, but the header has {len(names)}"
            )
        any_row = True
        yield index, {name: cell.strip() for name, cell in zip(names, cells, strict=True)}
    if not any_row:
        raise TraceFileError(f"{path}: line 2: the file has a header but no rows")


def _number(path: Path, line: int, name: str, text: str, *, minimum: float = 0.0) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise TraceFileError(f"{path}: line {line}: {name} is {text!r}, but must be a number")
    if value < minimum:
        raise TraceFileError(f"{path}: line {line}: {name} is {text}, but must be >= {minimum:g}")
    return value


def _integer(path: Path, line: int, name: str, text: str, *, minimum: int) -> int:
    value = _number(path, line, name, text, minimum=minimum)
    if value != int(value):
        raise TraceFileError(f"{path}: line {line}: {name} is {text}, but must be a whole number")
    return int(value)


def load_idle_trace(path: str | Path) -> IdleTrace:
    """The idle-node events of ``path`` grouped by instant (see the module docstring)."""
    path = Path(path)
    changes: list[PoolChange] = []
    idle: set[str] = set()
    seen: set[str] = set()
    added: set[str] = set()
    removed: set[str] = set()
    current: float | None = None
    for line, row in _rows(path, EVENT_COLUMNS):
        time_s = _number(path, line, "time_s", row["time_s"])
        node = row["node"]
        if not node:
            raise TraceFileError(f"{path}: line {line}: node is empty, but must name a node")
        if row["idle"] not in ("0", "1"):
            raise TraceFileError(
                f"{path}: line {line}: idle is {row['idle']!r}, but must be 0 or 1"
            )
        if current is not None and time_s < current:
            raise TraceFileError(
                f"{path}: line {line}: time_s is {row['time_s']}, before the previous row's "
                f"{current:g}; rows must be in time order"
            )
        if current is not None and time_s > current:
            changes.append(PoolChange(current, frozenset(added), frozenset(removed)))
            added, removed = set(), set()
        current = time_s
        if row["idle"] == "1":
            seen.add(node)
            if node not in idle:
                idle.add(node)
                if node in removed:
                    removed.discard(node)
                else:
                    added.add(node)
        else:
            if node not in seen:
                raise TraceFileError(
                    f"{path}: line {line}: node {node!r} is taken back (idle 0), but is unknown: "
                    "it was never idle before (every node starts busy)"
                )
            if node in idle:
                idle.discard(node)
                if node in added:
                    added.discard(node)
                else:
                    removed.add(node)
    if current is not None:
        changes.append(PoolChange(current, frozenset(added), frozenset(removed)))
    kept = tuple(c for c in changes if c.added or c.removed)
    return IdleTrace(kept, frozenset(seen), str(path))


def _series(path: Path, line: int, name: str, text: str) -> list[float]:
    parts = text.split()
    if not parts:
        raise TraceFileError(
            f"{path}: line {line}: {name} is empty, but must list space-separated numbers"
        )
    return [_number(path, line, name, part) for part in parts]


def load_jobs(path: str | Path, *, checkpoint_s: float | None = None) -> list[ScavengeJob]:
    """The jobs of ``path`` in submission order (ties by file order). ``checkpoint_s`` is the
    checkpoint interval of jobs whose row does not set one."""
    path = Path(path)
    jobs: list[ScavengeJob] = []
    names: set[str] = set()
    for line, row in _rows(path, JOB_COLUMNS):
        name = row["job"]
        if not name:
            raise TraceFileError(f"{path}: line {line}: job is empty, but must name the job")
        if name in names:
            raise TraceFileError(f"{path}: line {line}: job {name!r} appears twice")
        names.add(name)
        low = _integer(path, line, "min_nodes", row["min_nodes"], minimum=1)
        high = _integer(path, line, "max_nodes", row["max_nodes"], minimum=1)
        if high < low:
            raise TraceFileError(
                f"{path}: line {line}: max_nodes is {high}, but must be >= min_nodes ({low})"
            )
        counts = _series(path, line, "nodes", row["nodes"])
        rates = _series(path, line, "samples_per_s", row["samples_per_s"])
        if len(counts) != len(rates):
            raise TraceFileError(
                f"{path}: line {line}: nodes has {len(counts)} values but samples_per_s has "
                f"{len(rates)}; they must pair up"
            )
        if any(c != int(c) for c in counts):
            raise TraceFileError(
                f"{path}: line {line}: nodes must be whole numbers ({row['nodes']})"
            )
        if any(b <= a for a, b in itertools.pairwise(counts)):
            raise TraceFileError(f"{path}: line {line}: nodes must increase ({row['nodes']})")
        if counts[-1] < high or counts[0] > low:
            raise TraceFileError(
                f"{path}: line {line}: nodes spans {counts[0]:g}..{counts[-1]:g}, but must cover "
                f"min_nodes..max_nodes ({low}..{high})"
            )
        if not any(r > 0 for r in rates):
            raise TraceFileError(f"{path}: line {line}: samples_per_s has no positive value")
        every = checkpoint_s
        if row.get("checkpoint_s"):
            every = _number(path, line, "checkpoint_s", row["checkpoint_s"])
            if every <= 0:
                raise TraceFileError(f"{path}: line {line}: checkpoint_s must be > 0")
        jobs.append(
            ScavengeJob(
                job=name,
                model=row["model"],
                submit_s=_number(path, line, "submit_s", row["submit_s"]),
                min_nodes=low,
                max_nodes=high,
                scale_up_s=_number(path, line, "scale_up_s", row["scale_up_s"]),
                scale_down_s=_number(path, line, "scale_down_s", row["scale_down_s"]),
                total_samples=_positive(path, line, "total_samples", row["total_samples"]),
                nodes=tuple(int(c) for c in counts),
                samples_per_s=tuple(rates),
                checkpoint_s=every,
                line=line,
            )
        )
    jobs.sort(key=lambda j: (j.submit_s, j.line))
    return jobs


def _positive(path: Path, line: int, name: str, text: str) -> float:
    value = _number(path, line, name, text)
    if value <= 0:
        raise TraceFileError(f"{path}: line {line}: {name} is {text}, but must be > 0")
    return value
