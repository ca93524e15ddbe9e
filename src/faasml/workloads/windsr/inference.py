"""``faasml predict``'s files: new low-resolution inputs, stations, and the CF NetCDF it writes.

An input holds ``wind_speed_lr`` (sample, y_lr, x_lr) in m s-1 and, for a model with terrain,
``terrain`` (sample, y, x) in m at the high resolution; optional coordinates ``y``/``x`` (high
resolution) or ``y_lr``/``x_lr`` (evenly spaced), ``time`` (sample) and station variables as
in the training layout. A stations file holds ``station_row``, ``station_col`` ((station,) or
(sample, station), high-resolution cells) and, for prediction, ``station_speed`` (sample,
station) in m s-1. Everything is read CF-decoded and checked as ``files`` reads (one line).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml._imports import optional_import
from faasml.exceptions import WorkloadError
from faasml.workloads.windsr.cf import HEIGHT_BOUNDS, SPEED_BOUNDS
from faasml.workloads.windsr.fields import WindPatches
from faasml.workloads.windsr.files import SPEED_UNITS, Variables, as_cells, as_float, read_file

Array = NDArray[np.float32]


@dataclass(frozen=True)
class Coordinate:
    """A 1-D coordinate variable: its values and CF attributes (units, standard_name, ...)."""

    values: NDArray[Any]
    attrs: dict[str, str]


@dataclass(frozen=True)
class Stations:
    """Station cells (sample, station) and readings in m/s (None: cells only)."""

    rows: NDArray[np.int64]
    cols: NDArray[np.int64]
    speeds: Array | None


@dataclass(frozen=True, eq=False)
class Inputs:
    """A low-resolution input file as ``faasml predict`` applies a model to it."""

    patches: WindPatches
    """hr and truth hold the LR repeated (unknown here); stations as the input file has them."""
    y: Coordinate
    x: Coordinate
    time: Coordinate | None


def trial_model(job: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The model name and options a trial of a run trained: the record's ``job`` model with
    the trial's ``model.*`` configuration applied (a tuned width, schedule, ...), without the
    evaluation-only ``assimilate`` option."""
    spec = job.get("model")
    model = dict(spec) if isinstance(spec, Mapping) else {"name": spec}
    options = copy.deepcopy({k: v for k, v in model.items() if k != "name"})
    for key, value in config.items():
        if key.startswith("model."):
            options[key.removeprefix("model.")] = copy.deepcopy(value)
    options.pop("assimilate", None)
    return str(model.get("name")), options


def read_inputs(path: str | Path, scale: int, terrain_needed: bool) -> Inputs:
    """The low-resolution fields of ``path`` for a model of ``scale``."""
    return read_file(path, lambda source, v: _inputs(source, v, scale, terrain_needed))


def _inputs(source: Path, v: Variables, scale: int, terrain_needed: bool) -> Inputs:
    if not v.has("wind_speed_lr") or len(v.shape("wind_speed_lr")) != 3:
        raise WorkloadError(
            f"{source}: variable 'wind_speed_lr' (sample, y_lr, x_lr) is missing; an input "
            "for faasml predict needs it (see docs/windsr.md)"
        )
    _units(source, v, "wind_speed_lr")
    lr = as_float(source, "wind_speed_lr", v.read("wind_speed_lr", None), SPEED_BOUNDS)
    n, side = lr.shape[0], lr.shape[1] * scale
    if lr.shape[1] != lr.shape[2]:
        raise WorkloadError(
            f"{source}: variable 'wind_speed_lr' has shape {lr.shape}, but must be "
            "(sample, y_lr, x_lr) with y_lr = x_lr"
        )
    if v.has("terrain"):
        if v.shape("terrain") != (n, side, side):
            raise WorkloadError(
                f"{source}: variable 'terrain' has shape {v.shape('terrain')}, but must be "
                f"({n}, {side}, {side}): the model's scale {scale} times 'wind_speed_lr'"
            )
        terrain = as_float(source, "terrain", v.read("terrain", None), HEIGHT_BOUNDS)
    elif terrain_needed:
        raise WorkloadError(
            f"{source}: variable 'terrain' is missing; the model conditions on terrain height"
        )
    else:
        terrain = np.zeros((n, side, side), dtype=np.float32)
    stations = _stations(source, v, n, side) if v.has("station_row") else None
    placeholder = np.repeat(np.repeat(lr, scale, axis=1), scale, axis=2)
    empty = np.zeros((n, 0), dtype=np.int64)
    patches = WindPatches(
        placeholder,
        lr,
        terrain,
        placeholder.copy(),
        stations.rows if stations else empty,
        stations.cols if stations else empty,
        stations.speeds if stations and stations.speeds is not None else empty.astype(np.float32),
    )
    y, x = (_axis(v, name, side, scale) for name in ("y", "x"))
    time = _coordinate(v, "time") if v.has("time") and v.shape("time") == (n,) else None
    return Inputs(patches, y, x, time)


def read_stations(path: str | Path, samples: int | None, side: int | None) -> Stations:
    """The stations of a stations file: readings for ``samples`` samples (None: cells only,
    as a job's ``assimilate.stations`` takes), cells inside a ``side`` × ``side`` patch."""
    return read_file(path, lambda source, v: _stations(source, v, samples, side))


def _stations(source: Path, v: Variables, samples: int | None, side: int | None) -> Stations:
    for name in ("station_row", "station_col"):
        if not v.has(name) or len(v.shape(name)) not in (1, 2):
            raise WorkloadError(
                f"{source}: variable '{name}' ((station,) or (sample, station)) is missing"
            )
    shape = v.shape("station_row")
    if v.shape("station_col") != shape:
        raise WorkloadError(
            f"{source}: variable 'station_col' has shape {v.shape('station_col')}, but must "
            f"match 'station_row' {shape}"
        )
    bound = side if side is not None else 1 << 30
    rows = np.atleast_2d(as_cells(source, "station_row", v.read("station_row", None), bound))
    cols = np.atleast_2d(as_cells(source, "station_col", v.read("station_col", None), bound))
    if samples is None:
        return Stations(rows[:1], cols[:1], None)
    if rows.shape[0] not in (1, samples):
        raise WorkloadError(
            f"{source}: variable 'station_row' has shape {shape}, but must be (station,) or "
            f"({samples}, station) for the input's {samples} samples"
        )
    k = rows.shape[1]
    if not v.has("station_speed") or v.shape("station_speed") != (samples, k):
        found = v.shape("station_speed") if v.has("station_speed") else "missing"
        raise WorkloadError(
            f"{source}: variable 'station_speed' is {found}, but must have shape "
            f"({samples}, {k}): a reading per sample and station"
        )
    _units(source, v, "station_speed")
    speeds = as_float(source, "station_speed", v.read("station_speed", None), SPEED_BOUNDS)
    full = (samples, k)
    return Stations(np.broadcast_to(rows, full).copy(), np.broadcast_to(cols, full).copy(), speeds)


def _units(source: Path, v: Variables, name: str) -> None:
    found = v.units(name)
    if found is None or found.strip().lower() not in SPEED_UNITS:
        raise WorkloadError(
            f"{source}: variable '{name}' has units {found!r}, but must be m s-1 (wind speed)"
        )


def _coordinate(v: Variables, name: str) -> Coordinate:
    attrs = {}
    for key in ("units", "standard_name", "long_name", "axis", "calendar"):
        value = v.attr(name, key)
        if value is not None:
            attrs[key] = value.decode() if isinstance(value, bytes) else str(value)
    return Coordinate(np.asarray(v.read(name, None)), attrs)


def _axis(v: Variables, name: str, side: int, scale: int) -> Coordinate:
    """The high-resolution coordinate along ``name``: the file's own, else cell centres from
    its evenly spaced low-resolution one, else the cell index."""
    if v.has(name) and v.shape(name) == (side,):
        return _coordinate(v, name)
    low = f"{name}_lr"
    if v.has(low) and v.shape(low) == (side // scale,) and side // scale >= 2:
        coarse = _coordinate(v, low)
        values = np.asarray(coarse.values, dtype=np.float64)
        step = np.diff(values)
        if np.allclose(step, step[0]):
            fine = step[0] / scale
            start = values[0] - step[0] / 2 + fine / 2
            return Coordinate(start + fine * np.arange(side), coarse.attrs)
    axis = name.upper() if name in ("x", "y") else ""
    return Coordinate(
        np.arange(side, dtype=np.int32),
        {"units": "1", "long_name": f"{name} cell index", **({"axis": axis} if axis else {})},
    )


def write_prediction(
    path: str | Path,
    inputs: Inputs,
    fields: dict[str, tuple[Array, str]],
    attrs: dict[str, str],
) -> None:
    """A CF-1.8 NetCDF-4 file: ``fields`` (name -> (sample, y, x) m/s, long name) on the
    coordinates ``y``, ``x`` (and ``time``) of ``inputs``, with global ``attrs``."""
    h5netcdf = optional_import("h5netcdf", "windsr")
    target = Path(path)
    if not target.parent.is_dir():
        raise WorkloadError(f"cannot write {target}: the folder {target.parent} does not exist")
    partial = target.with_name(target.name + ".partial")  # no half-written file at ``path``
    try:
        with h5netcdf.File(partial, "w") as handle:
            _write(handle, inputs, fields, attrs)
        partial.replace(target)
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise WorkloadError(f"cannot write {target}: {err.strerror or err}") from None


def _write(
    handle: Any, inputs: Inputs, fields: dict[str, tuple[Array, str]], attrs: dict[str, str]
) -> None:
    n, side = len(inputs.patches), inputs.patches.size
    sample = "time" if inputs.time is not None else "sample"
    handle.dimensions = {sample: n, "y": side, "x": side}
    handle.attrs.update({"Conventions": "CF-1.8", **attrs})
    coords = [("y", inputs.y), ("x", inputs.x)]
    if inputs.time is not None:
        coords.append(("time", inputs.time))
    for name, coord in coords:
        variable = handle.create_variable(name, (name,), data=coord.values)
        variable.attrs.update({"axis": name.upper() if name != "time" else "T"})
        variable.attrs.update(coord.attrs)
    for name, (data, long_name) in fields.items():
        variable = handle.create_variable(
            name, (sample, "y", "x"), data=np.asarray(data, dtype=np.float32)
        )
        variable.attrs.update(
            {"units": "m s-1", "standard_name": "wind_speed", "long_name": long_name}
        )
