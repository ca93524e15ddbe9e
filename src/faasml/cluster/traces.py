"""Loaders for the trace formats of cluster mode.

- Workloads (job arrivals): the Pollux artifact's CSV ``name,time,application,num_replicas,
  batch_size`` and our own superset of it, which may add any of the optional columns
  ``min_gpus,max_gpus,min_batch,max_batch,epochs,deadline`` (``deadline`` in seconds after
  the job's arrival; an empty cell means "not set").
- Application traces (one directory per application, Pollux artifact format):
  ``placements.csv`` (``placement,local_bsz,step_time,sync_time``), ``scalability.csv``
  (``num_nodes,num_replicas,local_bsz,step_time,sync_time``) and ``validation-<batch>.csv``
  (``progress,iteration,metric,grad_sqr,grad_var`` per epoch).

The default trace directory is ``$FAASML_TRACES`` if set, else the Pollux data shipped in
the package (``faasml/cluster/data``: the artifact's workloads and application traces,
Apache-2.0, see its ``NOTICE.md``).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from faasml.cluster.plain import Job
from faasml.exceptions import ConfigError

FloatArray = npt.NDArray[np.float64]

TRACES_ENV = "FAASML_TRACES"

# Settings the Pollux artifact's simulator uses for its six applications (its
# ``applications.py``): training length in epochs and, for yolov3, a smaller largest local
# batch. ncf runs on one GPU at batch 32768 there; we keep that so results compare.
APPLICATION_DEFAULTS: dict[str, dict[str, int]] = {
    "bert": {"max_epochs": 2},
    "cifar10": {"max_epochs": 100},
    "ncf": {"max_epochs": 10, "max_gpus": 1, "fixed_batch": 32768},
    "imagenet": {"max_epochs": 90},
    "deepspeech2": {"max_epochs": 80},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}

_WORKLOAD_REQUIRED = ("name", "time", "application", "num_replicas", "batch_size")
_WORKLOAD_OPTIONAL = ("min_gpus", "max_gpus", "min_batch", "max_batch", "epochs", "deadline")


SHIPPED_TRACES = Path(__file__).resolve().parent / "data"
"""The traces shipped with the package (``pollux/`` inside)."""


def default_traces_dir() -> Path:
    """``$FAASML_TRACES`` if set, else the traces shipped with the package."""
    env = os.environ.get(TRACES_ENV)
    if env:
        return Path(env)
    return SHIPPED_TRACES


def pollux_dir(traces: Path | None = None) -> Path:
    """The Pollux artifact's directory under the traces directory."""
    return (traces or default_traces_dir()) / "pollux"


def resolve_workload(spec: str | Path, traces: Path | None = None) -> Path:
    """A workload path as given, or a name under the Pollux directory
    (``workloads/workload-6.csv`` or ``workload-6``)."""
    path = Path(spec)
    if path.is_file():
        return path
    base = pollux_dir(traces)
    for candidate in (base / spec, base / "workloads" / f"{spec}.csv", base / f"{spec}.csv"):
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"workload {str(spec)!r} is neither a file nor a trace under {base} "
        f"(set {TRACES_ENV} to the traces directory)"
    )


MAX_TIME_S = 1e11
"""Largest arrival time or deadline in seconds (about 3,000 years; Unix times fit)."""
MAX_INT = 2**31 - 1
"""Largest GPU count, batch size or epoch count a workload may give."""


class TraceError(ConfigError):
    """A trace file cannot be read or breaks a rule; the message names the file and rule."""


def _names(cells: list[str]) -> str:
    """Column names from a file, quoted where they hold anything but letters, digits, _."""
    return ", ".join(c if re.fullmatch(r"\w+", c, re.ASCII) else repr(c) for c in cells)


def _csv_rows(path: Path, kind: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the non-blank rows (with their line numbers) of a UTF-8 CSV file; a
    UTF-8 byte-order mark is accepted."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise TraceError(f"cannot read {kind} {path}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TraceError(
            f"{kind} {path} is not UTF-8 text (byte 0x{data[err.start]:02x} at offset "
            f"{err.start}); save it as UTF-8 CSV"
        ) from None
    if "\0" in text:
        raise TraceError(f"{kind} {path} holds a NUL character; it must be a text CSV file")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except csv.Error as err:
        raise TraceError(f"{kind} {path}:{reader.line_num}: not valid CSV ({err})") from None
    if not rows:
        raise TraceError(f"{kind} {path} is empty; it must start with a header line")
    header = [cell.strip() for cell in rows[0][1]]
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise TraceError(f"{kind} {path}: the header names column(s) {_names(twice)} twice")
    body = rows[1:]
    for line, row in body:
        if len(row) != len(header):
            raise TraceError(
                f"{kind} {path}:{line}: the row has {len(row)} cells, but the header has "
                f"{len(header)}"
            )
    return header, body


def _number(row: dict[str, str], column: str, where: str, integer: bool) -> float | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise TraceError(
            f"{where}: the value of {column} is {text!r}, but must be a number"
        ) from None
    if not math.isfinite(value):
        raise TraceError(f"{where}: the value of {column} is {text!r}, but must be finite")
    if integer:
        rule = (
            "an integer"
            if value != int(value)
            else ">= 1"
            if value < 1
            else f"at most {MAX_INT}"
            if value > MAX_INT
            else None
        )
        if rule:
            raise TraceError(f"{where}: the value of {column} is {text!r}, but must be {rule}")
    if not integer and abs(value) > MAX_TIME_S:
        raise TraceError(
            f"{where}: the value of {column} is {text!r}, but must be at most "
            f"{MAX_TIME_S:.0e} seconds"
        )
    return value


def load_workload(path: str | Path) -> list[Job]:
    """Jobs from a workload CSV (Pollux format or our superset), sorted by arrival.

    Rules: UTF-8 text (a byte-order mark is fine), a header with the required columns and
    no unknown or repeated one, at least one job, as many cells in every row as in the
    header; ``time`` (>= 0) and ``deadline`` (> 0) are seconds, at most 1e11; GPU
    counts, batch sizes and epochs are integers from 1 to 2^31 − 1; names are unique and
    names and applications non-empty. A broken rule raises :class:`TraceError` naming the
    file, line, column and rule."""
    path = Path(path)
    header, body = _csv_rows(path, "workload")
    columns = set(header)
    missing = [c for c in _WORKLOAD_REQUIRED if c not in columns]
    if missing:
        raise TraceError(f"workload {path} lacks the column(s) {', '.join(missing)}")
    unknown = sorted(columns - set(_WORKLOAD_REQUIRED) - set(_WORKLOAD_OPTIONAL))
    if unknown:
        raise TraceError(
            f"workload {path} has unknown column(s) {_names(unknown)}; "
            f"optional columns are {', '.join(_WORKLOAD_OPTIONAL)}"
        )
    if not body:
        raise TraceError(f"workload {path} has no jobs: it must have a row below the header")
    jobs: list[Job] = []
    seen: set[str] = set()
    for line, cells in body:
        row = dict(zip(header, cells, strict=True))
        where = f"{path}:{line}"
        name = row["name"].strip()
        if not name:
            raise TraceError(f"{where}: the value of name is empty")
        if name in seen:
            raise TraceError(f"{where}: job name {name!r} appears twice")
        seen.add(name)
        application = row["application"].strip()
        if not application:
            raise TraceError(f"{where}: the value of application is empty")
        values = {
            c: _number(row, c, where, c not in ("time", "deadline"))
            for c in ("time", "num_replicas", "batch_size", *_WORKLOAD_OPTIONAL)
        }
        for column in ("time", "num_replicas", "batch_size"):
            if values[column] is None:
                raise TraceError(f"{where}: the value of {column} is empty")
        arrival = float(values["time"] or 0.0)
        deadline = values["deadline"]
        if deadline is not None and deadline <= 0:
            raise TraceError(
                f"{where}: the value of deadline is {row['deadline'].strip()!r}, but must be "
                "> 0 seconds (the deadline must be after its arrival)"
            )

        def opt(column: str, values: dict[str, float | None] = values) -> int | None:
            value = values[column]
            return None if value is None else int(value)

        try:
            job = Job(
                name=name,
                application=application,
                arrival_s=arrival,
                gpus=int(values["num_replicas"] or 0),
                batch_size=int(values["batch_size"] or 0),
                min_gpus=opt("min_gpus") or 1,
                max_gpus=opt("max_gpus"),
                min_batch=opt("min_batch"),
                max_batch=opt("max_batch"),
                epochs=opt("epochs"),
                deadline_s=None if deadline is None else arrival + deadline,
            )
        except ConfigError as err:
            raise TraceError(f"{where}: {err}") from None
        jobs.append(job)
    jobs.sort(key=lambda j: (j.arrival_s, j.name))
    return jobs


@dataclass(frozen=True)
class ApplicationTrace:
    """The measured data of one application (Pollux artifact ``traces/<app>/``)."""

    name: str
    placements: tuple[str, ...]
    """Placement of each measured row, e.g. ``"22"``: 2 GPUs on each of two nodes."""
    local_bsz: FloatArray
    step_time: FloatArray
    sync_time: FloatArray
    scal_nodes: FloatArray
    """``scalability.csv`` rows (multi-node measurements beyond the placement table)."""
    scal_replicas: FloatArray
    scal_local_bsz: FloatArray
    scal_step_time: FloatArray
    scal_sync_time: FloatArray
    batch_sizes: tuple[int, ...]
    """Global batch sizes with a validation run, ascending."""
    progress: FloatArray
    """``progress`` per (batch size, epoch): cumulative statistical progress."""
    grad_sqr: FloatArray
    grad_var: FloatArray
    max_epochs: int
    min_local_bsz: int
    max_local_bsz: int
    max_gpus: int | None = None
    fixed_batch: int | None = None


def _read_columns(path: Path, columns: tuple[str, ...]) -> dict[str, list[str]]:
    header, body = _csv_rows(path, "trace")
    missing = [c for c in columns if c not in header]
    if missing:
        raise TraceError(f"trace {path} lacks the column(s) {', '.join(missing)}")
    if not body:
        raise TraceError(f"trace {path} has no rows below its header")
    index = [header.index(c) for c in columns]
    return {c: [row[i] for _, row in body] for c, i in zip(columns, index, strict=True)}


def _floats(values: list[str], path: Path, column: str) -> FloatArray:
    try:
        out = np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        raise TraceError(f"trace {path}: column {column} holds a non-number") from None
    if not np.isfinite(out).all():
        raise TraceError(f"trace {path}: column {column} holds a value that is not finite")
    return out


def load_application(directory: str | Path) -> ApplicationTrace:
    """Read one application's measured traces."""
    directory = Path(directory)
    name = directory.name
    if not directory.is_dir():
        raise ConfigError(f"application trace {directory} is not a directory")
    settings = APPLICATION_DEFAULTS.get(name, {})
    pl_path = directory / "placements.csv"
    pl = _read_columns(pl_path, ("placement", "local_bsz", "step_time", "sync_time"))
    scal_path = directory / "scalability.csv"
    scal_cols = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
    scal = _read_columns(scal_path, scal_cols) if scal_path.exists() else {c: [] for c in scal_cols}
    runs: dict[int, dict[str, FloatArray]] = {}
    for path in directory.glob("validation-*.csv"):
        match = re.fullmatch(r"validation-(\d+)\.csv", path.name)
        if not match:
            continue
        cols = _read_columns(path, ("progress", "grad_sqr", "grad_var"))
        runs[int(match.group(1))] = {c: _floats(v, path, c) for c, v in cols.items()}
    if not runs:
        raise ConfigError(f"application trace {directory} has no validation-<batch>.csv")
    batch_sizes = tuple(sorted(runs))
    epochs = min(len(r["progress"]) for r in runs.values())
    max_epochs = min(settings.get("max_epochs", epochs), epochs)
    local = _floats(pl["local_bsz"], pl_path, "local_bsz")
    return ApplicationTrace(
        name=name,
        placements=tuple(p.strip() for p in pl["placement"]),
        local_bsz=local,
        step_time=_floats(pl["step_time"], pl_path, "step_time"),
        sync_time=_floats(pl["sync_time"], pl_path, "sync_time"),
        scal_nodes=_floats(scal["num_nodes"], scal_path, "num_nodes"),
        scal_replicas=_floats(scal["num_replicas"], scal_path, "num_replicas"),
        scal_local_bsz=_floats(scal["local_bsz"], scal_path, "local_bsz"),
        scal_step_time=_floats(scal["step_time"], scal_path, "step_time"),
        scal_sync_time=_floats(scal["sync_time"], scal_path, "sync_time"),
        batch_sizes=batch_sizes,
        progress=np.stack([runs[b]["progress"][:epochs] for b in batch_sizes]),
        grad_sqr=np.stack([runs[b]["grad_sqr"][:epochs] for b in batch_sizes]),
        grad_var=np.stack([runs[b]["grad_var"][:epochs] for b in batch_sizes]),
        max_epochs=max_epochs,
        min_local_bsz=int(local.min()),
        max_local_bsz=int(settings.get("max_local_bsz", local.max())),
        max_gpus=settings.get("max_gpus"),
        fixed_batch=settings.get("fixed_batch"),
    )


def load_applications(traces: Path | None = None) -> dict[str, ApplicationTrace]:
    """Every application under ``<traces>/pollux/traces``."""
    base = pollux_dir(traces) / "traces"
    if not base.is_dir():
        raise ConfigError(
            f"no application traces at {base}; set {TRACES_ENV} to the traces directory"
        )
    return {
        d.name: load_application(d)
        for d in sorted(base.iterdir())
        if d.is_dir() and (d / "placements.csv").exists()
    }
