"""WindSR patches on disk: one layout, written as HDF5 or NetCDF, read from HDF5, NetCDF-4 or
NetCDF-3.

The layout (the same variable names in every format; docs/windsr.md shows it whole):

| variable | dimensions | units | |
|---|---|---|---|
| ``wind_speed`` | (sample, y, x) | m s-1 | simulated high-resolution speed (the target) |
| ``wind_speed_lr`` | (sample, y_lr, x_lr) | m s-1 | the low-resolution input; y = y_lr · scale |
| ``terrain`` | (sample, y, x) | m | terrain height |
| ``truth`` | (sample, y, x) | m s-1 | optional: the observed truth (default: ``wind_speed``) |
| ``station_row``, ``station_col`` | (sample, station) | 1 | optional: station cells |
| ``station_speed`` | (sample, station) | m s-1 | optional with them: station readings |

plus the global attribute ``layout = "faasml-windsr-1"``. HDF5 (and NetCDF-4, which is HDF5)
is read with ``h5py`` and CF-decoded by ``cf.decode``, NetCDF-3 with SciPy's ``netcdf_file``
and its own CF decoding (``maskandscale``); NetCDF-4 is written with ``h5netcdf``. A file that
breaks a rule (a missing variable, a wrong shape, unknown units, missing values, speeds or
heights outside ``cf``'s physical bounds) is refused with one line naming the file, the
variable and the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from faasml._imports import optional_import
from faasml.exceptions import WorkloadError
from faasml.workloads._dataset import Dataset
from faasml.workloads.windsr.cf import HEIGHT_BOUNDS, SPEED_BOUNDS, check_bounds, decode
from faasml.workloads.windsr.fields import WindPatches

LAYOUT = "faasml-windsr-1"
SPEED_UNITS = ("m s-1", "m/s", "m s**-1", "m.s-1", "m s^-1", "meters per second")
HEIGHT_UNITS = ("m", "meter", "meters", "metre", "metres")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
T = TypeVar("T")


def read_patches(path: str | Path, limit: int | None = None) -> WindPatches:
    """The patches of a WindSR file (HDF5, NetCDF-4 or NetCDF-3); ``limit``: the first ones."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise WorkloadError(f"the value of limit is {limit!r}, but must be an integer >= 1")
    return read_file(path, lambda source, handle: _patches(source, handle, limit))


def read_file(path: str | Path, reader: Callable[[Path, Variables], T]) -> T:
    """``reader(path, variables)`` over the file's variables (HDF5, NetCDF-4 or NetCDF-3, told
    by its signature), read CF-decoded; a file that cannot be read is one line."""
    source = Path(path)
    try:
        with source.open("rb") as handle:
            magic = handle.read(8)
    except OSError as err:
        raise WorkloadError(f"cannot read {source}: {err.strerror or err}") from None
    if magic == _HDF5_MAGIC:
        h5py = optional_import("h5py", "windsr")
        try:
            with h5py.File(source, "r") as handle:
                return reader(source, _Hdf5(handle))
        except OSError as err:
            raise WorkloadError(f"{source} is not a readable HDF5 file: {err}") from None
    if magic[:3] == b"CDF":
        netcdf = optional_import("scipy.io", "windsr")
        try:
            with netcdf.netcdf_file(source, "r", mmap=False, maskandscale=True) as handle:
                return reader(source, _Netcdf3(handle))
        except (OSError, TypeError, ValueError) as err:
            raise WorkloadError(f"{source} is not a readable NetCDF-3 file: {err}") from None
    raise WorkloadError(
        f"{source} is neither HDF5 nor NetCDF (it does not start with an HDF5 or 'CDF' signature)"
    )


def read_windsr(path: str | Path, limit: int | None = None) -> Dataset:
    """The ``windsr`` format of job files: ``read_patches(path, limit).to_dataset()``."""
    return read_patches(path, limit).to_dataset()


def write_patches(path: str | Path, patches: WindPatches) -> None:
    """Write ``patches`` in the layout: NetCDF-4 for a ``.nc`` path, else HDF5."""
    target = Path(path)
    variables: dict[str, tuple[tuple[str, ...], NDArray[Any], str]] = {
        "wind_speed": (("sample", "y", "x"), patches.hr, "m s-1"),
        "wind_speed_lr": (("sample", "y_lr", "x_lr"), patches.lr, "m s-1"),
        "terrain": (("sample", "y", "x"), patches.terrain, "m"),
        "truth": (("sample", "y", "x"), patches.truth, "m s-1"),
        "station_row": (("sample", "station"), patches.rows.astype(np.int32), "1"),
        "station_col": (("sample", "station"), patches.cols.astype(np.int32), "1"),
        "station_speed": (("sample", "station"), patches.readings, "m s-1"),
    }
    if target.suffix == ".nc":
        h5netcdf = optional_import("h5netcdf", "windsr")
        sizes = {
            "sample": len(patches),
            "y": patches.size,
            "x": patches.size,
            "y_lr": int(patches.lr.shape[1]),
            "x_lr": int(patches.lr.shape[2]),
            "station": int(patches.rows.shape[1]),
        }
        with h5netcdf.File(target, "w") as handle:
            handle.dimensions = sizes
            handle.attrs["layout"] = LAYOUT
            for name, (dims, data, units) in variables.items():
                variable = handle.create_variable(name, dims, data=data)
                variable.attrs["units"] = units
        return
    h5py = optional_import("h5py", "windsr")
    with h5py.File(target, "w") as handle:
        handle.attrs["layout"] = LAYOUT
        for name, (_, data, units) in variables.items():
            dataset = handle.create_dataset(name, data=data)
            dataset.attrs["units"] = units


class _Hdf5:
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def has(self, name: str) -> bool:
        if name not in self.handle or not hasattr(self.handle[name], "shape"):
            return False
        # NetCDF-4 keeps a dimension without a variable as an empty dimension scale so named.
        label = _text(self.handle[name].attrs.get("NAME")) or ""
        return not label.startswith("This is a netCDF dimension but not a netCDF variable")

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self.handle[name].shape)

    def read(self, name: str, limit: int | None) -> NDArray[Any]:
        data = self.handle[name]
        raw = np.asarray(data[:limit] if limit is not None else data[()])
        return decode(raw, data.attrs)

    def units(self, name: str) -> str | None:
        value = self.handle[name].attrs.get("units")
        return _text(value)

    def attr(self, name: str, key: str) -> Any:
        return self.handle[name].attrs.get(key)


class _Netcdf3:
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def has(self, name: str) -> bool:
        return name in self.handle.variables

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self.handle.variables[name].shape)

    def read(self, name: str, limit: int | None) -> NDArray[Any]:
        data = self.handle.variables[name]
        values = data[:limit] if limit is not None else data[:]
        if isinstance(values, np.ma.MaskedArray):  # SciPy's decoding masks missing values
            if not np.ma.is_masked(values):
                return np.array(values.data, copy=True)  # an integer stays an integer
            return np.ma.filled(values.astype(np.float64), np.nan)
        return np.array(values, copy=True)

    def units(self, name: str) -> str | None:
        return _text(getattr(self.handle.variables[name], "units", None))

    def attr(self, name: str, key: str) -> Any:
        return getattr(self.handle.variables[name], key, None)


Variables = _Hdf5 | _Netcdf3
"""A file's variables, read CF-decoded (``has``, ``shape``, ``read``, ``units``, ``attr``)."""


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0] if value.size else ""
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _patches(source: Path, handle: Variables, limit: int | None) -> WindPatches:
    """The file's patches (the first ``limit``), its layout checked before anything is read."""
    hr_shape = _grid(source, handle)
    n, height, _ = hr_shape
    stations = [handle.has(name) for name in ("station_row", "station_col", "station_speed")]
    if any(stations) and not all(stations):
        raise WorkloadError(
            f"{source}: variables station_row, station_col and station_speed come together; "
            "some are missing"
        )
    count = n if limit is None else min(n, limit)
    hr = as_float(source, "wind_speed", handle.read("wind_speed", limit), SPEED_BOUNDS)
    fields = {
        "lr": as_float(source, "wind_speed_lr", handle.read("wind_speed_lr", limit), SPEED_BOUNDS),
        "terrain": as_float(source, "terrain", handle.read("terrain", limit), HEIGHT_BOUNDS),
        "truth": as_float(source, "truth", handle.read("truth", limit), SPEED_BOUNDS)
        if handle.has("truth")
        else hr.copy(),
    }
    if all(stations):
        rows, cols, readings = _stations(source, handle, limit, n, height)
    else:
        rows = cols = np.zeros((count, 0), dtype=np.int64)
        readings = np.zeros((count, 0), dtype=np.float32)
    return WindPatches(hr, fields["lr"], fields["terrain"], fields["truth"], rows, cols, readings)


def _need(source: Path, handle: Variables, name: str, rank: int, units: tuple[str, ...]) -> None:
    """Variable ``name`` is there, of ``rank`` dimensions, in one of ``units``."""
    if not handle.has(name):
        raise WorkloadError(
            f"{source}: variable '{name}' is missing; a WindSR file needs wind_speed, "
            "wind_speed_lr and terrain (see docs/windsr.md)"
        )
    if len(handle.shape(name)) != rank:
        raise WorkloadError(
            f"{source}: variable '{name}' has shape {handle.shape(name)}, but must have "
            f"{rank} dimensions"
        )
    found = handle.units(name)
    if found is None or found.strip().lower() not in units:
        raise WorkloadError(
            f"{source}: variable '{name}' has units {found!r}, but must be "
            f"{'m s-1 (wind speed)' if units is SPEED_UNITS else 'm (height)'}"
        )


def _grid(source: Path, handle: Variables) -> tuple[int, ...]:
    """The high-resolution shape (sample, y, x), the gridded variables checked against it:
    square grids, the low resolution dividing the high one at least twice, the same
    samples in each."""
    _need(source, handle, "wind_speed", 3, SPEED_UNITS)
    _need(source, handle, "wind_speed_lr", 3, SPEED_UNITS)
    _need(source, handle, "terrain", 3, HEIGHT_UNITS)
    hr_shape = handle.shape("wind_speed")
    n, height, width = hr_shape
    if height != width or n < 1:
        raise WorkloadError(
            f"{source}: variable 'wind_speed' has shape {hr_shape}, but must be "
            "(sample, y, x) with y = x and at least one sample"
        )
    lr_shape = handle.shape("wind_speed_lr")
    if lr_shape[0] != n or lr_shape[1] != lr_shape[2] or lr_shape[1] < 1 or height % lr_shape[1]:
        raise WorkloadError(
            f"{source}: variable 'wind_speed_lr' has shape {lr_shape}, but must be "
            f"({n}, y_lr, x_lr) with y_lr = x_lr dividing the high-resolution side {height}"
        )
    if height // lr_shape[1] < 2:
        raise WorkloadError(
            f"{source}: variable 'wind_speed_lr' has the resolution of 'wind_speed' "
            f"({lr_shape[1]}); the scale factor y / y_lr must be >= 2"
        )
    for name in ("terrain", "truth"):
        if name == "truth" and not handle.has(name):
            continue
        _need(source, handle, name, 3, HEIGHT_UNITS if name == "terrain" else SPEED_UNITS)
        if handle.shape(name) != hr_shape:
            raise WorkloadError(
                f"{source}: variable '{name}' has shape {handle.shape(name)}, but must match "
                f"'wind_speed' {hr_shape}"
            )
    return hr_shape


def _stations(
    source: Path, handle: Variables, limit: int | None, n: int, side: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
    """The station cells (row, column) and readings, (sample, station) each, of ``n``
    samples on a grid of ``side`` cells."""
    _need(source, handle, "station_speed", 2, SPEED_UNITS)
    k_shape = handle.shape("station_speed")
    for name in ("station_row", "station_col"):
        if handle.shape(name) != k_shape or k_shape[0] != n:
            raise WorkloadError(
                f"{source}: variable '{name}' has shape {handle.shape(name)}, but must be "
                f"(sample, station) = {k_shape} like 'station_speed' with {n} samples"
            )
    rows = as_cells(source, "station_row", handle.read("station_row", limit), side)
    cols = as_cells(source, "station_col", handle.read("station_col", limit), side)
    readings = as_float(source, "station_speed", handle.read("station_speed", limit), SPEED_BOUNDS)
    return rows, cols, readings


def as_float(
    source: Path, name: str, data: NDArray[Any], bounds: tuple[float, float]
) -> NDArray[np.float32]:
    """A decoded field as float32: complete (no missing value) and within ``bounds``."""
    if not np.issubdtype(data.dtype, np.number):
        raise WorkloadError(f"{source}: variable '{name}' must be numeric, got {data.dtype}")
    values = data.astype(np.float32)
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:
        raise WorkloadError(
            f"{source}: variable '{name}' has {bad} missing or non-finite value(s) "
            "(_FillValue, missing_value, outside valid_range, or NaN), but a WindSR field must "
            "be complete"
        )
    check_bounds(source, name, values, bounds)
    return values


def as_cells(source: Path, name: str, data: NDArray[Any], side: int) -> NDArray[np.int64]:
    if not np.issubdtype(data.dtype, np.integer):
        raise WorkloadError(f"{source}: variable '{name}' must hold integer cell indices")
    if data.size and (data.min() < 0 or data.max() >= side):
        raise WorkloadError(
            f"{source}: variable '{name}' must hold cell indices in [0, {side}), "
            f"got values in [{data.min()}, {data.max()}]"
        )
    return data.astype(np.int64)
