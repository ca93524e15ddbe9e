"""Reading untyped mappings (YAML) into typed values, naming the bad field and the rule."""

from __future__ import annotations

import math
import os
import reprlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from faasml.exceptions import ConfigError, UnknownNameError

E = TypeVar("E", bound=ConfigError)


MAX_PARAMS = 100_000_000
"""The most parameters a model may have: 400 MB as float32, checked before it is built."""
MAX_DATA_VALUES = 300_000_000
"""The most values a generated dataset may hold: 1.2 GB as float32, checked before it is made."""


def check_size(
    what: str,
    count: int,
    limit: int,
    unit: str,
    error: type[ConfigError],
    *,
    at_least: bool = False,
) -> None:
    """Refuse ``count`` above ``limit`` before anything that large is allocated (``at_least``:
    the count stopped once past the limit, so it is a lower bound)."""
    if count > limit:
        raise error(
            f"{what} would have {'at least ' if at_least else ''}{count_text(count)} {unit}, "
            f"but may have at most {limit:,} "
            f"({limit * 4 / 1e9:.3g} GB as float32)"
        )


def count_text(count: int) -> str:
    """``1,234`` for a count, ``about 10^40`` for a huge one (whose ``str`` Python refuses)."""
    if abs(count) < 10**18:
        return f"{count:,}"
    return f"{'-' if count < 0 else ''}about 10^{int(abs(count).bit_length() * 0.30103)}"


class _Shown(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        return str(x) if abs(x) < 10**18 else count_text(x)


_SHOWN = _Shown()
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist, _SHOWN.maxtuple = 3, 6, 6, 6
_SHOWN.maxstring = _SHOWN.maxother = 60


def shown(value: object) -> str:
    """``repr(value)``, shortened (long strings, deep or long lists, huge numbers), in one line."""
    return _SHOWN.repr(value)


def shipped_or_path(name_or_path: str | os.PathLike[str], directory: Path, kind: str) -> Path:
    """The file a name or path means: a ``.yaml``/``.yml`` path or an existing file as given,
    otherwise a shipped ``directory/NAME.yaml``; an unknown name lists the shipped ones."""
    text = os.fspath(name_or_path)
    path = Path(text)
    if path.suffix in {".yaml", ".yml"} or path.exists():
        return path
    shipped = sorted(p.stem for p in directory.glob("*.yaml"))
    if text not in shipped:
        raise UnknownNameError(
            f"unknown {kind} '{text}'; choose one of: {', '.join(shipped)} "
            f"or give the path of a {kind} file"
        )
    return directory / f"{text}.yaml"


MAX_YAML_BYTES = 4 * 1024 * 1024
"""The largest YAML file faasml reads (job files, catalogs and profiles are a few KB)."""
MAX_YAML_DEPTH = 32
"""The deepest nesting of lists and mappings a YAML file may have."""
MAX_YAML_VALUES = 100_000
"""The most values a YAML file may hold once its aliases (``*name``) are expanded."""

_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def load_yaml(path: Path, error: type[ConfigError] = ConfigError) -> Any:
    """Parse a YAML file; a missing, unreadable or malformed file raises ``error`` naming the
    path and the rule, in one line: UTF-8 text (or UTF-16 with a byte-order mark, as YAML
    allows), at most ``MAX_YAML_BYTES``, nested at most ``MAX_YAML_DEPTH`` deep, at most
    ``MAX_YAML_VALUES`` values with aliases expanded, no alias inside itself, no key twice."""
    too_large = f"{path} is larger than {MAX_YAML_BYTES:,} bytes, the most faasml reads"
    try:
        with open(path, "rb") as stream:
            if os.fstat(stream.fileno()).st_size > MAX_YAML_BYTES:  # before reading any of it
                raise error(too_large)
            raw = stream.read(MAX_YAML_BYTES + 1)  # a pipe has no size: bounded while read
    except OSError as err:
        raise error(f"cannot read {path}: {err.strerror or err}") from None
    if len(raw) > MAX_YAML_BYTES:
        raise error(too_large)
    return parse_yaml(_decode(raw, path, error), str(path), error)


def parse_yaml(text: str, where: str, error: type[ConfigError] = ConfigError) -> Any:
    """Parse YAML text (a file's, or a value given on the command line or in the environment)
    under the rules of ``load_yaml``; ``where`` names it in the one-line error."""
    try:
        data = _load(text)
    except _RefusedError as err:
        raise error(f"{where} {err}") from None
    except yaml.YAMLError as err:
        raise error(f"{where} is not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:  # a backstop: the loader bounds the depth first
        raise error(f"{where} nests deeper than {MAX_YAML_DEPTH} levels") from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise error(f"{where} holds a value Python cannot read: {err}") from None
    _measure(data, 0, {}, set(), where, error)
    return data


def _load(text: str) -> Any:
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _RefusedError(Exception):
    """A rule of ``parse_yaml`` broken while the text is read (the message follows its name)."""


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, refusing while it reads, before anything large is built: more than
    ``MAX_YAML_VALUES`` nodes (an alias counted once), nesting deeper than ``MAX_YAML_DEPTH``,
    and a mapping with a key twice (YAML forbids it; PyYAML would keep the last silently)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._nodes += 1
        if self._nodes > MAX_YAML_VALUES:
            line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            raise _RefusedError(
                f"holds more than {MAX_YAML_VALUES:,} values (stopped at line {line})"
            )
        if not self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise _RefusedError(f"nests deeper than {MAX_YAML_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # ``<<: *defaults``: keys merged in are meant to be overridden
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                again = key in first
            except TypeError:
                continue  # an unhashable key: the constructor below says so
            if again:
                raise _RefusedError(
                    f"has the key {shown(key)} twice (lines {first[key]} and {line}): the "
                    "second would replace the first; keep one"
                )
            first[key] = line
        return super().construct_mapping(node, deep=deep)


def _decode(raw: bytes, path: Path, error: type[ConfigError]) -> str:
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom)), "utf-8")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as err:
        raise error(
            f"{path} is not {encoding.upper().removesuffix('-SIG')} text: byte "
            f"0x{raw[err.start]:02x} at offset {err.start} cannot be decoded "
            "(save the file as UTF-8)"
        ) from None


def _measure(
    value: Any,
    depth: int,
    memo: dict[int, tuple[int, int]],
    active: set[int],
    path: str,
    error: type[ConfigError],
) -> tuple[int, int]:
    """(values, height) of a parsed document, each shared node (an alias) measured once."""
    if not isinstance(value, dict | list):
        return 1, 0
    key = id(value)
    if key in active:
        raise error(f"{path} has an alias inside the value it names (*name within &name)")
    if key not in memo:
        if depth >= MAX_YAML_DEPTH:
            raise error(f"{path} nests deeper than {MAX_YAML_DEPTH} levels (aliases expanded)")
        active.add(key)
        values, height = 1, 0
        for child in value.values() if isinstance(value, dict) else value:
            count, below = _measure(child, depth + 1, memo, active, path, error)
            values, height = values + count, max(height, below + 1)
            if values > MAX_YAML_VALUES:
                break
        active.discard(key)
        memo[key] = values, height
    values, height = memo[key]
    if values > MAX_YAML_VALUES:
        raise error(f"{path} holds more than {MAX_YAML_VALUES:,} values with aliases expanded")
    if depth + height > MAX_YAML_DEPTH:
        raise error(f"{path} nests deeper than {MAX_YAML_DEPTH} levels (aliases expanded)")
    return values, height


def _yaml_problem(err: yaml.YAMLError) -> str:
    """The parser's complaint in one line, with the line and column it points at."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        mark = err.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        context = f"{err.context}: " if err.context else ""
        return " ".join(f"{context}{err.problem}{where}".split())
    return " ".join(str(err).split())


class Fields:
    """A mapping read field by field; every error names ``where.field`` and the rule broken."""

    def __init__(self, data: object, where: str, error: type[ConfigError] = ConfigError) -> None:
        if not isinstance(data, Mapping):
            raise error(f"{where} must be a mapping of fields, not {type(data).__name__}")
        odd = next((key for key in data if not isinstance(key, str)), None)
        if odd is not None or None in data:
            raise error(
                f"{where or 'the file'} has a field named {shown(odd)}; field names are text "
                "(quote a name that YAML would read as a number, true/false or null)"
            )
        self.data: Mapping[str, Any] = data
        self.where = where
        self.error = error
        self._seen: set[str] = set()

    def path(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def fail(self, name: str, value: object, rule: str) -> ConfigError:
        return self.error(f"the value of {self.path(name)} is {shown(value)}, but {rule}")

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = ...) -> Any:
        self._seen.add(name)
        if name not in self.data:
            if default is ...:
                raise self.error(f"{self.path(name)} is missing")
            return default
        return self.data[name]

    def number(
        self,
        name: str,
        default: float | None = None,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        strict_minimum: bool = False,
        required: bool = True,
    ) -> float:
        value = self.raw(name, ... if (required and default is None) else default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(name, value, "must be a number")
        value = float(value)
        if not math.isfinite(value):
            raise self.fail(name, value, "must be finite")
        if minimum is not None:
            if strict_minimum and value <= minimum:
                raise self.fail(name, value, f"must be > {minimum:g}")
            if not strict_minimum and value < minimum:
                raise self.fail(name, value, f"must be >= {minimum:g}")
        if maximum is not None and value > maximum:
            raise self.fail(name, value, f"must be <= {maximum:g}")
        return value

    def optional_number(
        self, name: str, *, minimum: float | None = None, strict_minimum: bool = False
    ) -> float | None:
        if self.raw(name, None) is None:
            return None
        return self.number(name, minimum=minimum, strict_minimum=strict_minimum)

    def integer(
        self,
        name: str,
        default: int | None = None,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        value = self.raw(name, ... if default is None else default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(name, value, "must be a whole number")
        if minimum is not None and value < minimum:
            raise self.fail(name, value, f"must be >= {minimum}")
        if maximum is not None and value > maximum:
            raise self.fail(name, value, f"must be <= {maximum}")
        return value

    def text(self, name: str, default: str | None = None) -> str:
        value = self.raw(name, ... if default is None else default)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(name, value, "must be a non-empty string")
        return value

    def choice(self, name: str, choices: Iterable[str], default: str | None = None) -> str:
        options = list(choices)
        value = self.text(name, default)
        if value not in options:
            raise self.fail(name, value, f"must be one of: {', '.join(options)}")
        return value

    def boolean(self, name: str, default: bool | None = None) -> bool:
        value = self.raw(name, ... if default is None else default)
        if not isinstance(value, bool):
            raise self.fail(name, value, "must be true or false")
        return value

    def sub(self, name: str, default: Mapping[str, Any] | None = None) -> Fields:
        value = self.raw(name, ... if default is None else default)
        return Fields(value, self.path(name), self.error)

    def items(self, name: str, *, allow_empty: bool = False) -> list[Any]:
        value = self.raw(name)
        if not isinstance(value, list):
            raise self.fail(name, value, "must be a list")
        if not value and not allow_empty:
            raise self.fail(name, value, "must not be empty")
        return value

    def finish(self) -> None:
        """Reject fields nobody read: a typo must not pass silently."""
        unknown = sorted(set(self.data) - self._seen)
        if unknown:
            raise self.error(
                f"{self.where or 'file'} has unknown field(s): {', '.join(map(str, unknown))}"
            )
