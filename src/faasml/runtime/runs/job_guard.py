"""What ``faasml resume`` runs: the job its record holds, never an edited file's nor a stranger's.

A resumed run continues the job it recorded. If the job file it was read from has changed
since, the resume is refused (naming the first field that differs) unless the user says to go
on with the recorded job (``--ignore-job-file``). A record is only data, so a job in it that
names code (a ``module:attr`` model factory, a module to preload) is run only when it carries
the user's signature (``faasml._signing``), made when the run began on this machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from faasml._signing import sign, unsigned_reason
from faasml.exceptions import ConfigError, FaasmlError
from faasml.job import JobSpec, from_mapping, load_job
from faasml.runtime.record.function_file import brought_back

__all__ = [
    "code_named",
    "first_difference",
    "job_file_change",
    "recorded_job",
    "seal_fields",
    "source_path",
    "verify_job",
]

CODE_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
"""A ``module.path:attribute`` reference: what faasml imports and calls."""
SELF_CHECKED = ("faasml.workloads.function_model:function_model", "faasml.loop.model:loop_model")
"""A training function's and a loop's factories: they load only a pickle signed by the user."""
SIGNED = ("job", "job_source", "job_file_sha256", "platform", "platform_options")
"""The record's fields that say what runs: what the signature covers."""


def source_path(source: str | None) -> str | None:
    """The job file's absolute path (so a resume from another folder finds the same file)."""
    return str(Path(source).resolve()) if source else None


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(field path, text) of every string in ``value``, keys included."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            inner = f"{where}.{key}" if where else str(key)
            yield from _strings(key, inner)
            yield from _strings(item, inner)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def code_named(job: object, platform_options: object = None) -> list[tuple[str, str]]:
    """(field path, reference) of what a job and its platform options would import and run."""
    strings = [*_strings(job, "job"), *_strings(platform_options, "platform_options")]
    found = [(where, text) for where, text in strings if CODE_REF.match(text)]
    found = [(where, text) for where, text in found if text not in SELF_CHECKED]
    if isinstance(platform_options, Mapping) and "preload" in platform_options:
        found.append(("platform_options.preload", str(platform_options["preload"])))
    return found


def _signed_bytes(saved: Mapping[str, Any]) -> bytes:
    part = {key: saved.get(key) for key in SIGNED}
    return json.dumps(part, sort_keys=True, separators=(",", ":"), default=_plain).encode()


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot sign {type(value).__name__}")


def seal_fields(saved: Mapping[str, Any]) -> dict[str, str]:
    """What a new record adds: its job file's digest, and (a job that names code) the user's
    signature of the fields that say what runs."""
    fields: dict[str, str] = {}
    source = saved.get("job_source")
    digest = _digest(Path(source)) if isinstance(source, str) else None
    if digest is not None:
        fields["job_file_sha256"] = digest
    if code_named(saved.get("job"), saved.get("platform_options")):
        fields["job_signature"] = sign(_signed_bytes({**saved, **fields}))
    return fields


def verify_job(saved: Mapping[str, Any], where: Path) -> bool:
    """Whether the record's job is the user's own (signed); a job that names code without the
    user's signature is refused in one line, before anything of it is imported."""
    named = code_named(saved.get("job"), saved.get("platform_options"))
    if not named:
        return False
    reason = unsigned_reason(_signed_bytes(saved), saved.get("job_signature"))
    if reason is None:
        return True
    field, ref = named[0]
    raise ConfigError(
        f"refusing to run code named by the record {where} ({field} = {ref!r}): {reason}, so "
        "it was not written by a run of yours on this machine; run it again from the job file"
    )


def first_difference(recorded: Any, current: Any, where: str = "") -> str | None:
    """The first field (in sorted order) where two jobs differ, with both values; None if equal."""
    if isinstance(recorded, Mapping) and isinstance(current, Mapping):
        for key in sorted(set(recorded) | set(current), key=str):
            inner = f"{where}.{key}" if where else str(key)
            if key not in recorded or key not in current:
                old = repr(recorded[key]) if key in recorded else "absent"
                new = repr(current[key]) if key in current else "absent"
                return f"{inner}: {_short(old)} in the record, {_short(new)} in the file"
            found = first_difference(recorded[key], current[key], inner)
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(current, list) and len(recorded) == len(current):
        for index, (old, new) in enumerate(zip(recorded, current, strict=True)):
            found = first_difference(old, new, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    if recorded == current and type(recorded) is type(current):
        return None
    return f"{where}: {_short(repr(recorded))} in the record, {_short(repr(current))} in the file"


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _comparable(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job mapping as JSON reads it back, without its platform (the command line may have
    chosen another; the record keeps it apart)."""
    plain = json.loads(json.dumps(job, default=_plain))
    plain.pop("platform", None)
    return dict(plain)


def _file_mapping(path: Path) -> object:
    """The job file as read, with the environment's fields: nothing of it imported or run."""
    from faasml._validate import load_yaml
    from faasml.job.layers import environment_overrides, set_path

    data = load_yaml(path, ConfigError)
    if isinstance(data, Mapping):
        data = dict(data)
        for key, value in environment_overrides(os.environ).items():
            set_path(data, key, value)
    return data


def job_file_change(saved: Mapping[str, Any], trusted: bool) -> str | None:
    """How the job file a record names differs from the job it recorded; None where it is
    gone, unchanged, or changed in its text only. ``trusted``: the record is the user's own
    (signed), so the file it names may be read as a job (which imports its model factory)."""
    source = saved.get("job_source")
    if not isinstance(source, str) or not source or not Path(source).is_file():
        return None
    if _digest(Path(source)) == saved.get("job_file_sha256"):
        return None
    try:
        if not trusted:
            named = code_named(_file_mapping(Path(source)))
            if named:  # the record names no code (else it is signed): they differ
                field, ref = named[0]
                return f"{field.removeprefix('job.')} names {ref!r} in the file, not in the record"
        current = load_job(source).to_dict(redact=True)
    except FaasmlError as err:
        return f"it no longer reads as a job: {err}"
    return first_difference(_comparable(saved["job"]), _comparable(current))


def _restored(job: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded job as its run began with it: JSON keeps a mapping's keys as text, so a
    batch-size schedule's epochs are numbers again."""
    data: dict[str, Any] = json.loads(json.dumps(job, default=_plain))
    flow = data.get("workflow")
    schedule = flow.get("batch_size_schedule") if isinstance(flow, dict) else None
    if isinstance(flow, dict) and isinstance(schedule, dict):
        flow["batch_size_schedule"] = {
            int(key) if isinstance(key, str) and key.isascii() and key.isdigit() else key: value
            for key, value in schedule.items()
        }
    return data


def _with_credentials(job: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded job with the store passwords the record does not keep, from the
    environment (``FAASML_STORE``, ``FAASML_STORES__<NAME>``), as the run began with them."""
    from faasml.job.layers import environment_overrides, redact_url

    data = _restored(job)
    given = environment_overrides(os.environ)
    urls = [("store", data.get("store"), data)]
    stores = data.get("stores")
    if isinstance(stores, dict):
        urls += [(f"stores.{name}", url, stores) for name, url in stores.items()]
    for where, url, holder in urls:
        if not isinstance(url, str) or ":***@" not in url:
            continue
        value = given.get(where)
        if not isinstance(value, str) or redact_url(value) != url:
            variable = "FAASML_" + where.upper().replace(".", "__")
            raise ConfigError(
                f"the recorded {where} is {url}, but the record keeps no password: set "
                f"{variable} to the URL with its password to resume"
            )
        holder[where.rpartition(".")[2]] = value
    result: dict[str, Any] = data
    return result


def recorded_job(saved: Mapping[str, Any], run_dir: Path, *, ignore_job_file: bool) -> JobSpec:
    """The ``JobSpec`` a record holds, checked: code it names is the user's own, and the job
    file it was read from has not changed since (unless ``ignore_job_file``)."""
    trusted = verify_job(saved, run_dir / "record.json")
    if not ignore_job_file:
        difference = job_file_change(saved, trusted)
        if difference is not None:
            raise ConfigError(
                f"the job file {saved['job_source']} has changed since the run began "
                f"({difference}); the run continues only with the job it recorded: resume with "
                f"faasml resume {run_dir} --ignore-job-file, or start a new run from the file"
            )
    source = saved.get("job_source")
    job = brought_back(_with_credentials(saved["job"]), run_dir)
    return from_mapping(job, source=source if isinstance(source, str) else None)
