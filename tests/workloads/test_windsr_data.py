"""WindSR data: the seeded wind-field generator and its statistics, the HDF5 / NetCDF layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from faasml.exceptions import WorkloadError
from faasml.workloads.data import generate_dataset, load_dataset
from faasml.workloads.windsr import generate_patches, read_patches, write_patches
from faasml.workloads.windsr.fields import (
    CHANNELS,
    coarsen,
    patches_from_dataset,
    radial_spectrum,
    smooth,
)

pytest.importorskip("h5py")


def test_the_generator_is_seeded() -> None:
    a, b = generate_patches(6, size=16, seed=3), generate_patches(6, size=16, seed=3)
    c = generate_patches(6, size=16, seed=4)
    for name in ("hr", "lr", "terrain", "truth", "rows", "cols", "readings"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert not np.array_equal(a.hr, c.hr)


def test_the_turbulence_has_a_kolmogorov_spectrum() -> None:
    # 1-D energy spectrum k^-5/3 <=> 2-D spectral density k^-8/3 (the terrain effect off).
    patches = generate_patches(200, size=64, speedup=0.0, bias=0.0, seed=1)
    k, power = radial_spectrum(patches.hr)
    chosen = (k >= 2) & (k <= 20)
    slope = np.polyfit(np.log(k[chosen]), np.log(power[chosen]), 1)[0]
    assert slope == pytest.approx(-8 / 3, abs=0.25)


def _detail_correlation(speedup: float) -> float:
    p = generate_patches(300, size=32, speedup=speedup, seed=2)
    inner = (slice(None), slice(6, -6), slice(6, -6))  # clear of the periodic smoothing's wrap
    terrain = (p.terrain - smooth(p.terrain.astype(np.float64), 2.0))[inner]
    speed = (p.hr - smooth(p.hr.astype(np.float64), 2.0))[inner]
    return float(np.corrcoef(terrain.ravel(), speed.ravel())[0, 1])


def test_wind_speeds_up_over_crests_only_when_terrain_acts() -> None:
    assert _detail_correlation(1.0) > 0.5
    assert abs(_detail_correlation(0.0)) < 0.1


def test_low_resolution_bias_and_stations_follow_their_definitions() -> None:
    p = generate_patches(200, size=32, scale=4, stations=5, bias=1.0, obs_noise=0.1, seed=5)
    assert p.lr.shape == (200, 8, 8) and p.scale == 4
    np.testing.assert_allclose(p.lr, coarsen(p.hr, 4), rtol=1e-6)
    assert (p.truth - p.hr).std() == pytest.approx(1.0, rel=0.3)
    at_sites = p.truth[np.arange(200)[:, None], p.rows, p.cols]
    assert (p.readings - at_sites).std() == pytest.approx(0.1, rel=0.3)
    assert all(len(set(zip(r, c, strict=True))) == 5 for r, c in zip(p.rows, p.cols, strict=True))


def test_a_dataset_holds_the_channels_and_gives_the_patches_back() -> None:
    data = generate_dataset("wind-sr", 5, seed=1, size=16, scale=4, stations=3)
    assert data.input_shape == (len(CHANNELS), 16, 16)
    assert set(np.unique(data.labels)) <= {0, 1}
    back = patches_from_dataset(data, 4)
    original = generate_patches(5, size=16, scale=4, stations=3, seed=1)
    np.testing.assert_array_equal(back.lr, original.lr)
    np.testing.assert_array_equal(np.sort(back.readings), np.sort(original.readings))


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"size": 18, "scale": 4}, "dataset.size is 18, but must be a multiple of dataset.scale"),
        ({"bias": -1}, "dataset.bias is -1, but must be a number >= 0"),
        ({"stations": 300, "size": 16}, "dataset.stations is 300"),
    ],
)
def test_bad_generator_options_get_one_line_errors(options: dict[str, object], words: str) -> None:
    with pytest.raises(WorkloadError, match=words.replace(".", r"\.")):
        generate_dataset("wind-sr", 4, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["wind.h5", "wind.nc"])
def test_hdf5_and_netcdf4_files_round_trip(tmp_path: Path, name: str) -> None:
    if name.endswith(".nc"):
        pytest.importorskip("h5netcdf")
    patches = generate_patches(7, size=16, scale=4, stations=2, seed=8)
    path = tmp_path / name
    write_patches(path, patches)
    back = read_patches(path)
    for field in ("hr", "lr", "terrain", "truth", "rows", "cols", "readings"):
        np.testing.assert_array_equal(getattr(back, field), getattr(patches, field))
    assert len(read_patches(path, limit=3)) == 3
    data = load_dataset("windsr", path)
    np.testing.assert_array_equal(data.features, patches.to_dataset().features)


def _netcdf3(path: Path, units: str = "m s-1", lr_side: int = 4) -> None:
    from scipy.io import netcdf_file

    patches = generate_patches(3, size=16, scale=4, stations=2, seed=9)
    with netcdf_file(path, "w") as handle:
        for dim, size in (
            ("sample", 3),
            ("y", 16),
            ("x", 16),
            ("y_lr", lr_side),
            ("x_lr", lr_side),
        ):
            handle.createDimension(dim, size)
        for name, dims, data, unit in (
            ("wind_speed", ("sample", "y", "x"), patches.hr, units),
            (
                "wind_speed_lr",
                ("sample", "y_lr", "x_lr"),
                patches.lr if lr_side == 4 else np.full((3, lr_side, lr_side), 8.0),
                "m/s",
            ),
            ("terrain", ("sample", "y", "x"), patches.terrain, "m"),
        ):
            variable = handle.createVariable(name, "f4", dims)
            variable[:] = data
            variable.units = unit


def test_netcdf3_files_are_read_without_stations(tmp_path: Path) -> None:
    path = tmp_path / "classic.nc"
    _netcdf3(path)
    patches = read_patches(path)
    expected = generate_patches(3, size=16, scale=4, stations=2, seed=9)
    np.testing.assert_array_equal(patches.hr, expected.hr)
    np.testing.assert_array_equal(patches.truth, expected.hr)  # no truth: the simulation
    assert patches.rows.shape == (3, 0)


def test_wrong_units_shapes_and_variables_name_the_file_variable_and_rule(tmp_path: Path) -> None:
    import h5py

    path = tmp_path / "knots.nc"
    _netcdf3(path, units="knots")
    with pytest.raises(
        WorkloadError,
        match=r"knots\.nc: variable 'wind_speed' has units 'knots', but must be m s-1",
    ):
        read_patches(path)
    odd = tmp_path / "odd.nc"
    _netcdf3(odd, lr_side=5)
    with pytest.raises(
        WorkloadError, match=r"odd\.nc: variable 'wind_speed_lr' has shape \(3, 5, 5\)"
    ):
        read_patches(odd)
    missing = tmp_path / "missing.h5"
    with h5py.File(missing, "w") as handle:
        handle.create_dataset("wind_speed", data=np.zeros((2, 8, 8), np.float32)).attrs["units"] = (
            "m s-1"
        )
    with pytest.raises(WorkloadError, match=r"missing\.h5: variable 'wind_speed_lr' is missing"):
        read_patches(missing)
    text = tmp_path / "text.h5"
    text.write_text("not a file of wind")
    with pytest.raises(WorkloadError, match=r"text\.h5 is neither HDF5 nor NetCDF"):
        read_patches(text)
    with pytest.raises(WorkloadError, match="cannot read"):
        read_patches(tmp_path / "absent.h5")


def test_station_cells_outside_the_patch_are_refused(tmp_path: Path) -> None:
    import h5py

    path = tmp_path / "stations.h5"
    write_patches(path, generate_patches(2, size=16, seed=1))
    with h5py.File(path, "a") as handle:
        handle["station_row"][0, 0] = 99
    with pytest.raises(
        WorkloadError, match=r"variable 'station_row' must hold cell indices in \[0, 16\)"
    ):
        read_patches(path)
