"""Layers of a job file: FAASML_* environment variables, --set assignments, dotted paths,
and credentials kept out of what faasml echoes. Public through ``faasml.job``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from faasml._validate import parse_yaml, shown
from faasml.exceptions import ConfigError

ENV_PREFIX = "FAASML_"
ENV_FIELDS = ("name", "batch_size", "seed", "platform", "store", "catalog", "profile")
"""Top-level fields the environment may set: ``FAASML_BATCH_SIZE=128``."""
ENV_SECTIONS = ("model", "dataset", "optimizer", "tuning", "training", "stores")
"""Sections whose fields the environment may set: ``FAASML_TUNING__TRIALS=8``."""
_TEXT_FIELDS = frozenset({"name", "platform", "store", "catalog", "profile"})


class _Unset:
    """An override that removes its field (``set_path``): never a value a job file holds."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""The value of an override that leaves its field out of the job, as if never written."""

HYPERBAND_REPLACES = ("trials", "stages", "epochs_per_stage")
"""The tuning fields of successive halving that Hyperband's brackets set themselves."""


def hyperband_overrides(
    max_epochs: int, given: Mapping[str, Any], flag: str = "--hyperband", via: str = "--set"
) -> dict[str, Any]:
    """Overrides that run a job's tuning as Hyperband for a largest budget of ``max_epochs``
    epochs (``tuning.hyperband``) in place of its successive halving (``flag``); ``given``:
    the other overrides (``via``), which may not also set what the brackets set."""
    clash = sorted(
        f"tuning.{k}" for k in (*HYPERBAND_REPLACES, "hyperband") if f"tuning.{k}" in given
    )
    if clash:
        raise ConfigError(
            f"{flag} sets the brackets' trials, stages and epochs; leave out {via} "
            f"{', '.join(clash)}"
        )
    return {"tuning.hyperband": max_epochs, **{f"tuning.{k}": UNSET for k in HYPERBAND_REPLACES}}


def parse_assignments(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["tuning.trials=8", "platform=local"]`` (command-line ``--set``) -> overrides mapping.

    Values are read as YAML (``8`` is a number, ``[8, 16]`` a list); text stays text.
    """
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or any(not part for part in key.strip().split(".")):
            raise ConfigError(
                f"the value of --set is {shown(item)}, but must be FIELD=VALUE with a dotted field "
                "such as tuning.trials=8"
            )
        value = _yaml_or_text(text)
        overrides[key.strip()] = text if value is None and text else value
    return overrides


def environment_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Dotted job paths set by ``FAASML_<FIELD>`` / ``FAASML_<SECTION>__<FIELD>`` variables.

    Values are read as YAML scalars (``8`` is a number, ``true`` a flag); other ``FAASML_*``
    variables belong to other parts of faasml and are ignored here.
    """
    found: dict[str, Any] = {}
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        top_level = len(parts) == 1 and parts[0] in ENV_FIELDS
        in_section = len(parts) >= 2 and parts[0] in ENV_SECTIONS and all(parts)
        if top_level and parts[0] in _TEXT_FIELDS:
            found[parts[0]] = environ[name]  # a name stays text even when it looks like 123
        elif top_level or in_section:
            found[".".join(parts)] = _scalar(environ[name])
    return found


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for records, reports and logs)."""
    if not has_password(url):
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


def has_password(url: str) -> bool:
    try:
        return bool(urlsplit(url).password)
    except ValueError:
        return False


def _scalar(text: str) -> Any:
    value = _yaml_or_text(text)
    return value if isinstance(value, str | int | float | bool) else text


def _yaml_or_text(text: str) -> Any:
    """``text`` read as YAML, or as written where it is not YAML faasml reads (malformed, too
    deep, too large): the field's own rule then says what is wrong with it, in one line."""
    try:
        return parse_yaml(text, "the value")
    except ConfigError:
        return text


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if child is None:
            child = {}
        elif isinstance(child, str) and part == "model" and node is data:
            child = {"name": child}  # the `model: name` shorthand
        elif not isinstance(child, Mapping):
            raise ConfigError(
                f"cannot set {dotted}: {part} is {shown(child)}, not a mapping of fields"
            )
        node[part] = node = dict(child)
    if value is UNSET:
        node.pop(leaf, None)
    else:
        node[leaf] = value
