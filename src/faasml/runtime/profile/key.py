"""The key a measured job profile is cached under: what the job IS, not where it lies.

A run directory is new for every run and a pickled training function differs in every process
(cloudpickle writes a closure's tensors, a module's globals, by value), so neither a data
file's path nor a pickle's bytes may enter the key: the data counts by its content (a file's
bytes, a directory's files, an npz's arrays) and a function job's model by its structure
(``function_model.function_structure``, kept in the job's model options as ``structure``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faasml.catalog import Catalog
from faasml.job import JobSpec

__all__ = ["PROBE_VERSION", "data_digest", "profile_key"]

PROBE_VERSION = 17
"""Bumped when the probe measures differently: older cached profiles are then re-measured."""

_PICKLED = ("function", "sha256", "signature", "label")
"""A function job's model options that name the pickle or the run, not the model."""

_DIGESTS: dict[tuple[str, str, tuple[tuple[str, int, int], ...]], str] = {}
"""(format, path, each file's size and mtime) -> content digest, while the process lives."""


def profile_key(job: JobSpec, catalog: Catalog, platform_options: Mapping[str, Any]) -> str:
    """Everything that changes what the probe would measure, hashed."""
    from faasml._version import __version__

    redacted = job.to_dict(redact=True)
    identity = {
        "model": job.model.name,
        "model_options": _model_identity(job),
        "search_space": job.search_space.to_dict() if job.search_space else None,
        "dataset": _dataset_identity(redacted.get("dataset") or {}),
        "optimizer": job.optimizer.name,
        "batch_size": job.batch_size,
        "platform": job.platform,
        "platform_options": {k: repr(v) for k, v in sorted(platform_options.items())},
        "catalog": repr(catalog.platform),
        "stores": redacted.get("stores"),
        "store": job.store,
        "probe": PROBE_VERSION,
        "faasml": __version__,
    }
    text = json.dumps(identity, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _model_identity(job: JobSpec) -> dict[str, Any]:
    """The model's options, a function job's by its structure rather than its pickle (a job
    packed before ``structure`` existed keeps its pickle's hash)."""
    options = dict(job.model.options)
    if options.get("structure"):
        for name in _PICKLED:
            options.pop(name, None)
    return options


def _dataset_identity(dataset: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset's fields with a file's path replaced by its content's digest."""
    out = dict(dataset)
    path = out.pop("path", None)
    if path is not None:
        out["content"] = data_digest(str(path), str(out.get("format") or ""))
    return out


def data_digest(path: str, format: str) -> str:
    """The sha256 of the data at ``path``: an npz's arrays (its zip entries carry the time
    they were written), else the file's bytes, or a directory's files in name order. A path
    that cannot be read keys by its name (the run then fails reading it, saying why)."""
    source = Path(path)
    try:
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else []
        stats = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
        if not source.is_dir():
            stat = source.stat()
            stats = ((str(source), stat.st_size, stat.st_mtime_ns),)
    except OSError:
        return f"unreadable:{path}"
    memo = (format, str(source.resolve()), stats)
    if memo not in _DIGESTS:
        digest = hashlib.sha256()
        try:
            if format == "npz" and not files:
                _npz_digest(source, digest)
            elif files:
                for file in files:
                    digest.update(str(file.relative_to(source)).encode() + b"\0")
                    _file_digest(file, digest)
            else:
                _file_digest(source, digest)
        except (OSError, ValueError):
            return f"unreadable:{path}"
        _DIGESTS[memo] = digest.hexdigest()
    return _DIGESTS[memo]


def _file_digest(path: Path, digest: Any) -> None:
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)


def _npz_digest(path: Path, digest: Any) -> None:
    import numpy as np

    with np.load(path, allow_pickle=False) as arrays:
        for name in sorted(arrays.files):
            array = np.ascontiguousarray(arrays[name])
            digest.update(f"{name}:{array.dtype.str}:{array.shape}\0".encode())
            digest.update(array.tobytes())
