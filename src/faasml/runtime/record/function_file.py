"""A training function's packed bytes kept beside the record, not in it.

A job made from the user's training function or loop carries the function cloudpickled
(``model.function``, base64); a loop's closure often holds its data, so it can run to tens
of megabytes. The record is rewritten after every segment, so it names a file of the run
directory instead (written once), and a resume reads the function back from there, checked
against the digest the signed record holds (``unpack_function`` checks its signature too).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faasml.exceptions import ConfigError

FUNCTION_FILE = "function/train_fn.b64"
"""Where a run directory keeps its packed training function."""


def kept_apart(job: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    """``job`` as the record holds it: a packed function written to ``FUNCTION_FILE`` under
    ``run_dir`` and named there by ``{"file": FUNCTION_FILE}``; any other job as it is."""
    model = job.get("model")
    if not (isinstance(model, Mapping) and isinstance(model.get("function"), str)):
        return dict(job)
    path = run_dir / FUNCTION_FILE
    packed = str(model["function"])
    if not (path.is_file() and path.read_text() == packed):
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(packed)
        os.replace(part, path)
    return {**job, "model": {**model, "function": {"file": FUNCTION_FILE}}}


def brought_back(job: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    """``job`` as its run began: the packed function read back from the file the record
    names, which must match the record's ``model.sha256``; a ConfigError in one line
    otherwise."""
    model = job.get("model")
    if not (isinstance(model, Mapping) and isinstance(model.get("function"), Mapping)):
        return dict(job)
    named = model["function"].get("file")
    if named != FUNCTION_FILE:
        raise ConfigError(
            f"the record's model.function.file is {named!r}, but a run keeps its training "
            f"function in {FUNCTION_FILE!r}"
        )
    path = run_dir / FUNCTION_FILE
    if not path.is_file():
        raise ConfigError(
            f"the run's training function {path} is missing: it was written when the run "
            "began and a resume needs it; start a new run"
        )
    packed = path.read_text()
    try:
        digest = hashlib.sha256(base64.b64decode(packed, validate=True)).hexdigest()
    except (binascii.Error, ValueError):
        digest = ""
    if digest != model.get("sha256"):
        raise ConfigError(
            f"the run's training function {path} does not match the digest its record holds "
            "(model.sha256): it changed after the run began; start a new run"
        )
    return {**job, "model": {**model, "function": packed}}
