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
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from faasml.cluster.records import Job
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


def _number(row: dict[str, str], column: str, where: str, integer: bool) -> float | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            f"{where}: the value of {column} is {text!r}, but must be a number"
        ) from None
    if integer and value != int(value):
        raise ConfigError(f"{where}: the value of {column} is {text!r}, but must be an integer")
    return value


def load_workload(path: str | Path) -> list[Job]:
    """Jobs from a workload CSV (Pollux format or our superset), sorted by arrival."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read workload {path}: {err.strerror or err}") from None
    reader = csv.DictReader(text.splitlines())
    columns = set(reader.fieldnames or ())
    missing = [c for c in _WORKLOAD_REQUIRED if c not in columns]
    if missing:
        raise ConfigError(f"workload {path} lacks the column(s) {', '.join(missing)}")
    unknown = sorted(columns - set(_WORKLOAD_REQUIRED) - set(_WORKLOAD_OPTIONAL))
    if unknown:
        raise ConfigError(
            f"workload {path} has unknown column(s) {', '.join(unknown)}; "
            f"optional columns are {', '.join(_WORKLOAD_OPTIONAL)}"
        )
    jobs: list[Job] = []
    seen: set[str] = set()
    for line, row in enumerate(reader, start=2):
        where = f"{path}:{line}"
        name = (row["name"] or "").strip()
        if not name:
            raise ConfigError(f"{where}: the value of name is empty")
        if name in seen:
            raise ConfigError(f"{where}: job name {name!r} appears twice")
        seen.add(name)
        values = {
            c: _number(row, c, where, c not in ("time", "deadline"))
            for c in ("time", "num_replicas", "batch_size", *_WORKLOAD_OPTIONAL)
        }
        for column in ("time", "num_replicas", "batch_size"):
            if values[column] is None:
                raise ConfigError(f"{where}: the value of {column} is empty")
        arrival = float(values["time"] or 0.0)
        deadline = values["deadline"]

        def opt(column: str, values: dict[str, float | None] = values) -> int | None:
            value = values[column]
            return None if value is None else int(value)

        jobs.append(
            Job(
                name=name,
                application=(row["application"] or "").strip(),
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
        )
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
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read trace {path}: {err.strerror or err}") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in columns if c not in (reader.fieldnames or ())]
    if missing:
        raise ConfigError(f"trace {path} lacks the column(s) {', '.join(missing)}")
    out: dict[str, list[str]] = {c: [] for c in columns}
    for row in reader:
        for c in columns:
            out[c].append(row[c])
    return out


def _floats(values: list[str], path: Path, column: str) -> FloatArray:
    try:
        return np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        raise ConfigError(f"trace {path}: column {column} holds a non-number") from None


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
