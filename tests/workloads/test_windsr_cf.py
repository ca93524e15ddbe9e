"""Real NetCDF files read right: CF packing and missing values decoded, implausible ones refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from faasml.exceptions import WorkloadError
from faasml.workloads.windsr import generate_patches, read_patches, write_patches
from faasml.workloads.windsr.fields import WindPatches

pytest.importorskip("h5py")
h5netcdf = pytest.importorskip("h5netcdf")

FILL = -32767
SCALE = 0.01


def _packed_netcdf4(path: Path, patches: WindPatches, *, hole: bool = False) -> None:
    """The layout as reanalysis output stores it: speeds as int16 with scale_factor 0.01 and
    a _FillValue, written by h5netcdf (NetCDF-4)."""
    n, size, lr = len(patches), patches.size, patches.lr.shape[-1]
    with h5netcdf.File(path, "w") as handle:
        handle.dimensions = {"sample": n, "y": size, "x": size, "y_lr": lr, "x_lr": lr}
        handle.attrs["layout"] = "faasml-windsr-1"
        for name, dims, data in (
            ("wind_speed", ("sample", "y", "x"), patches.hr),
            ("wind_speed_lr", ("sample", "y_lr", "x_lr"), patches.lr),
        ):
            packed = np.round(data / SCALE).astype(np.int16)
            if hole and name == "wind_speed_lr":
                packed[1, 0, 0] = FILL
            variable = handle.create_variable(name, dims, np.int16, data=packed, fillvalue=FILL)
            variable.attrs["units"] = "m s-1"
            variable.attrs["scale_factor"] = np.float32(SCALE)
            variable.attrs["add_offset"] = np.float32(0.0)
        terrain = handle.create_variable("terrain", ("sample", "y", "x"), data=patches.terrain)
        terrain.attrs["units"] = "m"


def test_a_cf_packed_int16_file_reads_as_metres_per_second(tmp_path: Path) -> None:
    patches = generate_patches(3, size=16, scale=4, stations=0, seed=5)
    path = tmp_path / "packed.nc"
    _packed_netcdf4(path, patches)
    back = read_patches(path)
    # Packing rounds to 0.01 m/s: the decoded field is within half of that, not 100 times it.
    np.testing.assert_allclose(back.hr, patches.hr, atol=SCALE / 2 + 1e-5)
    np.testing.assert_allclose(back.lr, patches.lr, atol=SCALE / 2 + 1e-5)
    assert back.hr.dtype == np.float32
    assert 1.0 < float(back.hr.mean()) < 20.0


def test_a_fill_value_is_a_missing_value_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "hole.nc"
    _packed_netcdf4(path, generate_patches(3, size=16, scale=4, stations=0, seed=5), hole=True)
    with pytest.raises(WorkloadError) as caught:
        read_patches(path)
    text = str(caught.value)
    assert "variable 'wind_speed_lr' has 1 missing or non-finite value(s)" in text
    assert "\n" not in text


def test_missing_value_and_add_offset_decode_in_hdf5(tmp_path: Path) -> None:
    import h5py

    patches = generate_patches(2, size=16, scale=4, stations=2, seed=6)
    path = tmp_path / "offset.h5"
    write_patches(path, patches)
    with h5py.File(path, "a") as handle:
        del handle["terrain"]
        packed = np.round((patches.terrain - 1000.0) / 0.5).astype(np.int16)
        terrain = handle.create_dataset("terrain", data=packed)
        terrain.attrs.update(
            {"units": "m", "scale_factor": 0.5, "add_offset": 1000.0, "missing_value": -9999}
        )
    back = read_patches(path)
    np.testing.assert_allclose(back.terrain, patches.terrain, atol=0.25 + 1e-3)
    with h5py.File(path, "a") as handle:
        handle["terrain"][0, 3, 3] = -9999
    with pytest.raises(WorkloadError, match="variable 'terrain' has 1 missing"):
        read_patches(path)


def test_netcdf3_packing_is_decoded_by_scipy(tmp_path: Path) -> None:
    from scipy.io import netcdf_file

    patches = generate_patches(2, size=16, scale=4, stations=0, seed=7)
    path = tmp_path / "classic.nc"
    with netcdf_file(path, "w") as handle:
        for dim, size in (("sample", 2), ("y", 16), ("x", 16), ("y_lr", 4), ("x_lr", 4)):
            handle.createDimension(dim, size)
        for name, dims, data, units in (
            ("wind_speed", ("sample", "y", "x"), patches.hr, "m s-1"),
            ("wind_speed_lr", ("sample", "y_lr", "x_lr"), patches.lr, "m s-1"),
        ):
            variable = handle.createVariable(name, "h", dims)
            variable[:] = np.round(data / SCALE).astype(np.int16)
            variable.units = units
            variable.scale_factor = SCALE
            variable._FillValue = np.int16(FILL)
        terrain = handle.createVariable("terrain", "f4", ("sample", "y", "x"))
        terrain[:] = patches.terrain
        terrain.units = "m"
    back = read_patches(path)
    np.testing.assert_allclose(back.hr, patches.hr, atol=SCALE / 2 + 1e-5)


def test_an_implausible_wind_speed_is_refused_in_one_line(tmp_path: Path) -> None:
    import h5py

    patches = generate_patches(2, size=16, scale=4, stations=0, seed=8)
    path = tmp_path / "raw.h5"
    write_patches(path, patches)
    with h5py.File(path, "a") as handle:  # the packed integers, with the packing left out
        handle["wind_speed"][...] = np.round(patches.hr / SCALE)
    with pytest.raises(WorkloadError) as caught:
        read_patches(path)
    text = str(caught.value)
    assert "variable 'wind_speed' has values in" in text
    assert "but a wind speed must lie in [0, 120] m s-1" in text
    assert "\n" not in text
    with h5py.File(path, "a") as handle:
        handle["wind_speed"][...] = patches.hr
        handle["terrain"][0, 0, 0] = 12_000.0
    with pytest.raises(WorkloadError, match=r"'terrain' .* a height must lie in \[-500, 9000\] m"):
        read_patches(path)


def test_netcdf3_station_cells_with_a_fill_value_stay_cell_indices(tmp_path: Path) -> None:
    from scipy.io import netcdf_file

    patches = generate_patches(2, size=16, scale=4, stations=2, seed=9)
    path = tmp_path / "stations3.nc"
    with netcdf_file(path, "w") as handle:
        sizes = (("sample", 2), ("y", 16), ("x", 16), ("y_lr", 4), ("x_lr", 4), ("station", 2))
        for dim, size in sizes:
            handle.createDimension(dim, size)
        for name, dims, data, kind, units in (
            ("wind_speed", ("sample", "y", "x"), patches.hr, "f4", "m s-1"),
            ("wind_speed_lr", ("sample", "y_lr", "x_lr"), patches.lr, "f4", "m s-1"),
            ("terrain", ("sample", "y", "x"), patches.terrain, "f4", "m"),
            ("station_row", ("sample", "station"), patches.rows, "i", "1"),
            ("station_col", ("sample", "station"), patches.cols, "i", "1"),
            ("station_speed", ("sample", "station"), patches.readings, "f4", "m s-1"),
        ):
            variable = handle.createVariable(name, kind, dims)
            variable[:] = data
            variable.units = units
            if kind == "i":
                variable._FillValue = np.int32(-1)
    back = read_patches(path)
    np.testing.assert_array_equal(back.rows, patches.rows)
    np.testing.assert_array_equal(back.readings, patches.readings)
