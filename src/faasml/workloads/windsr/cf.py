"""CF decoding of a variable read from HDF5 / NetCDF-4, and the physical bounds of WindSR fields.

``h5py`` and ``h5netcdf`` hand back the stored integers of a packed variable: neither applies
``scale_factor`` / ``add_offset`` nor masks ``_FillValue`` / ``missing_value`` (xarray and
netCDF4 do, but are not dependencies). ``decode`` applies the CF rules (CF conventions §2.5.1
and §8.1) in one place; NetCDF-3 files are decoded by SciPy's own ``netcdf_file(...,
maskandscale=True)``. Missing values become NaN; the file reader then refuses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import WorkloadError

SPEED_BOUNDS = (0.0, 120.0)
"""m/s: a wind speed is not negative, and the strongest surface gust measured is 113 m/s."""
HEIGHT_BOUNDS = (-500.0, 9000.0)
"""m: the lowest land (the Dead Sea shore, -430 m) to above the highest summit (8,849 m)."""


def decode(raw: NDArray[Any], attrs: Mapping[str, Any]) -> NDArray[Any]:
    """``raw`` as the CF attributes in ``attrs`` say: values equal to ``_FillValue`` or
    ``missing_value`` or outside ``valid_min`` / ``valid_max`` / ``valid_range`` (in packed
    units) become NaN, then ``raw * scale_factor + add_offset``. An integer variable without
    packing or missing values is returned as it is."""
    data = np.asarray(raw)
    if str(_scalar(attrs.get("_Unsigned")) or "").lower() == "true" and data.dtype.kind == "i":
        data = data.view(data.dtype.str.replace("i", "u"))
    missing = np.zeros(data.shape, dtype=bool)
    for name in ("_FillValue", "missing_value"):
        if attrs.get(name) is not None:
            for value in np.atleast_1d(np.asarray(attrs[name])).tolist():
                missing |= np.isnan(data) if _is_nan(value) else data == value
    low, high = _valid_range(attrs)
    if low is not None:
        missing |= data < low
    if high is not None:
        missing |= data > high
    scale, offset = attrs.get("scale_factor"), attrs.get("add_offset")
    if scale is None and offset is None and not missing.any():
        return data
    packed = np.asarray(scale if scale is not None else offset)
    kind = packed.dtype if packed.dtype.kind == "f" else np.dtype(np.float64)
    out = data.astype(np.result_type(kind, np.float32))
    if scale is not None:
        out = out * _scalar(scale)
    if offset is not None:
        out = out + _scalar(offset)
    out[missing] = np.nan
    return out


def check_bounds(
    source: object, name: str, values: NDArray[Any], bounds: tuple[float, float]
) -> None:
    """Refuse a field outside its physical ``bounds`` in one line naming the variable."""
    if not values.size:
        return
    low, high = float(np.min(values)), float(np.max(values))
    what, units = ("wind speed", "m s-1") if bounds == SPEED_BOUNDS else ("height", "m")
    if low < bounds[0] or high > bounds[1]:
        raise WorkloadError(
            f"{source}: variable '{name}' has values in [{low:.6g}, {high:.6g}] {units}, but "
            f"a {what} must lie in [{bounds[0]:g}, {bounds[1]:g}] {units} (check its units "
            "and its CF packing: scale_factor, add_offset)"
        )


def _valid_range(attrs: Mapping[str, Any]) -> tuple[float | None, float | None]:
    if attrs.get("valid_range") is not None:
        pair = np.asarray(attrs["valid_range"]).reshape(-1)
        if pair.size == 2:
            return float(pair[0]), float(pair[1])
    low, high = attrs.get("valid_min"), attrs.get("valid_max")
    return (
        None if low is None else float(_scalar(low)),
        None if high is None else float(_scalar(high)),
    )


def _scalar(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.reshape(-1)[0] if value.size else None
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8", "replace")
    return value


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value
