"""Loss-curve files: what a training run records per epoch, read back by the simulator.

Format (documented in docs/adaptive.md, "Loss-curve files"): UTF-8 CSV with a header row
naming the columns ``epoch,loss`` and optionally ``time_s`` and ``cost_usd`` (seconds and US
dollars since the run started, at the end of that epoch). Lines starting with ``#`` before the
header carry metadata as ``# key: value`` (for example ``# workload: lr-higgs``). Epochs are
whole numbers >= 0, strictly increasing; losses finite and >= 0. Files are written atomically
(a temporary file in the same folder, flushed, fsynced, then renamed over the target).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from faasml._files import write_atomic
from faasml.exceptions import ConfigError

COLUMNS = ("epoch", "loss", "time_s", "cost_usd")
REQUIRED = ("epoch", "loss")


@dataclass(frozen=True)
class CurvePoint:
    """One epoch of a run: its index, the training loss at its end, and optionally when and at
    what spend it ended."""

    epoch: int
    loss: float
    time_s: float | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class LossCurve:
    """The points of one run, epochs strictly increasing, with free-form metadata."""

    points: tuple[CurvePoint, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None

    @property
    def epochs(self) -> list[int]:
        return [p.epoch for p in self.points]

    @property
    def losses(self) -> list[float]:
        return [p.loss for p in self.points]

    def __len__(self) -> int:
        return len(self.points)


def _check_points(points: tuple[CurvePoint, ...], where: str) -> None:
    if not points:
        raise ConfigError(f"{where} holds no points; a loss curve needs at least one epoch")
    previous = -1
    for index, point in enumerate(points):
        label = f"{where}, point {index + 1}"
        if isinstance(point.epoch, bool) or not isinstance(point.epoch, int) or point.epoch < 0:
            raise ConfigError(
                f"{label}: the epoch is {point.epoch!r}, but must be a whole number >= 0"
            )
        if point.epoch <= previous:
            raise ConfigError(
                f"{label}: the epoch is {point.epoch}, but epochs must increase strictly "
                f"(the previous one is {previous})"
            )
        previous = point.epoch
        if not math.isfinite(point.loss) or point.loss < 0:
            raise ConfigError(f"{label}: the loss is {point.loss!r}, but must be finite and >= 0")
        for name in ("time_s", "cost_usd"):
            value = getattr(point, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ConfigError(f"{label}: {name} is {value!r}, but must be finite and >= 0")


def write_curve(
    path: str | os.PathLike[str],
    points: Iterable[CurvePoint],
    *,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write a loss-curve file atomically; optional columns are written when any point has them."""
    target = Path(path)
    rows = tuple(points)
    _check_points(rows, str(target))
    columns = list(REQUIRED) + [
        name for name in COLUMNS[2:] if any(getattr(p, name) is not None for p in rows)
    ]
    buffer = io.StringIO()
    for key, value in (metadata or {}).items():
        if "\n" in key or "\n" in value or ":" in key:
            raise ConfigError(f"metadata key {key!r} must not hold ':' or line breaks")
        buffer.write(f"# {key}: {value}\n")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for point in rows:
        writer.writerow(
            ["" if getattr(point, name) is None else repr(getattr(point, name)) for name in columns]
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, buffer.getvalue())
    return target


def read_curve(path: str | os.PathLike[str]) -> LossCurve:
    """Read a loss-curve file; errors name the file, the line and the rule broken."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read loss curve {source}: {err.strerror or err}") from None
    metadata: dict[str, str] = {}
    lines = text.splitlines()
    start = 0
    while start < len(lines) and (lines[start].startswith("#") or not lines[start].strip()):
        key, sep, value = lines[start].lstrip("#").partition(":")
        if sep:
            metadata[key.strip()] = value.strip()
        start += 1
    rows = list(csv.reader(lines[start:]))
    if not rows:
        raise ConfigError(f"{source} has no header row; expected columns {', '.join(REQUIRED)}")
    header = [name.strip() for name in rows[0]]
    missing = [name for name in REQUIRED if name not in header]
    unknown = [name for name in header if name not in COLUMNS]
    if missing or unknown:
        raise ConfigError(
            f"{source}: the header is {','.join(header)!r}, but must name {', '.join(REQUIRED)} "
            f"and optionally {', '.join(COLUMNS[2:])}"
        )
    points = []
    for offset, row in enumerate(rows[1:]):
        line = start + 2 + offset
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise ConfigError(
                f"{source}, line {line}: {len(row)} values, but the header names {len(header)}"
            )
        cells = dict(zip(header, (cell.strip() for cell in row), strict=True))
        try:
            epoch_text = cells["epoch"]
            epoch = int(epoch_text)
        except ValueError:
            raise ConfigError(
                f"{source}, line {line}: the epoch is {cells['epoch']!r}, "
                "but must be a whole number"
            ) from None
        values: dict[str, float | None] = {}
        for name in ("loss", "time_s", "cost_usd"):
            raw = cells.get(name, "")
            if raw == "" and name != "loss":
                values[name] = None
                continue
            try:
                values[name] = float(raw)
            except ValueError:
                raise ConfigError(
                    f"{source}, line {line}: {name} is {raw!r}, but must be a number"
                ) from None
        loss = values["loss"]
        assert loss is not None  # required column, parsed above
        points.append(CurvePoint(epoch, loss, values["time_s"], values["cost_usd"]))
    curve = LossCurve(tuple(points), metadata, str(source))
    _check_points(curve.points, str(source))
    return curve
