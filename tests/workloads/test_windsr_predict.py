"""WindSR from the CLI: a job's ``assimilate:`` section, assimilation in evaluation beside plain
super-resolution, and ``faasml predict`` on new low-resolution NetCDF files (real runs)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.job import from_mapping, load_job
from faasml.workloads import create_model
from faasml.workloads.windsr import generate_patches
from faasml.workloads.windsr.fields import WindPatches
from faasml.workloads.windsr.model import WindModel

pytest.importorskip("torch")
pytest.importorskip("skimage")
pytest.importorskip("h5py")
h5netcdf = pytest.importorskip("h5netcdf")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODEL = {"width": 8, "levels": 2, "timesteps": 50, "sample_steps": 3, "eval_images": 8}


def _job(assimilate: dict[str, Any] | None = None) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / "train-windsr.yaml").read_text())
    job["dataset"] = {**job["dataset"], "samples": 40, "size": 16, "test_fraction": 0.2}
    job["model"] = {**job["model"], **MODEL}
    job["batch_size"] = 8
    job["training"] = {"max_epochs": 1}
    if assimilate is not None:
        job["assimilate"] = assimilate
    return job


def _stations_file(path: Path, rows: list[int], cols: list[int], speeds: Any = None) -> None:
    with h5netcdf.File(path, "w") as handle:
        handle.dimensions = {
            "station": len(rows),
            **({"sample": len(speeds)} if speeds is not None else {}),
        }
        handle.create_variable("station_row", ("station",), data=np.array(rows, np.int32))
        handle.create_variable("station_col", ("station",), data=np.array(cols, np.int32))
        if speeds is not None:
            speed = handle.create_variable(
                "station_speed", ("sample", "station"), data=np.asarray(speeds, np.float32)
            )
            speed.attrs["units"] = "m s-1"


def test_a_job_with_assimilate_parses_and_builds_the_model_option(tmp_path: Path) -> None:
    _stations_file(tmp_path / "network.nc", [2, 9], [3, 12])
    spec = from_mapping(
        _job({"stations": "network.nc", "radius": 3, "strength": 0.5}), base_dir=tmp_path
    )
    assert spec.assimilate is not None and spec.assimilate.cells == ((2, 3), (9, 12))
    option = spec.model_options()["assimilate"]
    assert option == {"stations": [[2, 3], [9, 12]], "radius": 3, "strength": 0.5, "inpaint": True}
    again = from_mapping(spec.to_dict(), base_dir=tmp_path)
    assert again.assimilate == spec.assimilate
    _stations_file(tmp_path / "far.nc", [2, 16], [3, 1])  # row 16 is outside a 16x16 patch
    with pytest.raises(ConfigError, match=r"far\.nc: variable 'station_row' must hold cell"):
        from_mapping(_job({"stations": "far.nc"}), base_dir=tmp_path)
    plain = from_mapping(_job({}), base_dir=tmp_path)
    assert plain.assimilate is not None and plain.assimilate.stations == "data"
    assert plain.model_options()["assimilate"]["radius"] == "dynamic"


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"radius": 0}, "the value of assimilate.radius is 0, but must be 'dynamic' or a whole"),
        ({"strength": 2}, "the value of assimilate.strength is 2.0, but must be <= 1"),
        ({"strength": 0}, "the value of assimilate.strength is 0.0, but must be > 0"),
        ({"inpaint": "yes"}, "the value of assimilate.inpaint is 'yes', but must be true or false"),
        ({"stations": "absent.nc"}, "the value of assimilate.stations is 'absent.nc', but must"),
        ({"stations": -1}, "the value of assimilate.stations is -1, but must be 'data'"),
        ({"radius": 2, "sigma": 1}, "assimilate has unknown field(s): sigma"),
        ("dynamic", "assimilate must be a mapping of fields"),
    ],
)
def test_bad_assimilate_values_get_one_line(
    tmp_path: Path, section: Any, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(_job(section)))
    assert main(["job", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_assimilate_is_refused_for_a_model_that_is_not_windsr(tmp_path: Path) -> None:
    job = yaml.safe_load((EXAMPLES / "train-windsr.yaml").read_text())
    job["model"] = {"name": "logistic-regression"}
    job["dataset"] = {"synthetic": "higgs-like", "samples": 100}
    job["assimilate"] = {}
    with pytest.raises(ConfigError, match="assimilate applies to the WindSR models"):
        from_mapping(job, base_dir=tmp_path)


def test_assimilate_with_a_workflow_is_refused(tmp_path: Path) -> None:
    job = _job({})
    job["workflow"] = {"batch_size_schedule": {0: 8, 1: 16}}
    job["training"] = {"max_epochs": 2}
    with pytest.raises(ConfigError, match="assimilate is not applied to the phases of a workflow"):
        from_mapping(job, base_dir=tmp_path)
    del job["assimilate"]
    assert from_mapping(job, base_dir=tmp_path).workflow is not None


def test_evaluation_reports_assimilation_beside_plain_super_resolution() -> None:
    patches = generate_patches(8, size=16, scale=4, stations=4, obs_noise=0.0, seed=3)
    data = patches.to_dataset()
    options = {**MODEL, "assimilate": {"stations": "data", "radius": 3}}
    model = create_model("windsr", data.input_shape, 2, **options)
    params = model.init_params(0)
    scores = model.evaluate(params, data.features, data.labels)
    for key in ("psnr", "ssim", "assim_psnr", "assim_ssim", "site_rmse", "assim_site_rmse"):
        assert np.isfinite(scores[key]), key
    # Exact readings in-painted at the stations: the field near them moves toward the truth.
    assert scores["assim_site_rmse"] < scores["site_rmse"]
    plain = create_model("windsr", data.input_shape, 2, **MODEL)
    assert "assim_psnr" not in plain.evaluate(params, data.features, data.labels)


def _lr_input(path: Path, patches: WindPatches) -> None:
    """A new low-resolution file as a user has it: LR speed CF-packed, terrain, coordinates."""
    n, m = len(patches), patches.lr.shape[-1]
    with h5netcdf.File(path, "w") as handle:
        handle.dimensions = {"time": n, "y_lr": m, "x_lr": m, "y": patches.size, "x": patches.size}
        time = handle.create_variable("time", ("time",), data=np.arange(n, dtype=np.float64))
        time.attrs["units"] = "hours since 2020-01-01 00:00:00"
        for name in ("y_lr", "x_lr"):
            coord = handle.create_variable(name, (name,), data=1000.0 * np.arange(m) + 500.0)
            coord.attrs["units"] = "m"
        packed = np.round(patches.lr / 0.01).astype(np.int16)
        lr = handle.create_variable(
            "wind_speed_lr", ("time", "y_lr", "x_lr"), np.int16, data=packed, fillvalue=-32767
        )
        lr.attrs.update({"units": "m s-1", "scale_factor": np.float32(0.01)})
        terrain = handle.create_variable("terrain", ("time", "y", "x"), data=patches.terrain)
        terrain.attrs["units"] = "m"


def test_a_run_assimilates_in_evaluation_and_predict_round_trips_a_file(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_job({"stations": "data", "radius": "dynamic"})))
    run_dir = tmp_path / "run"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["train", str(job), "--budget", "1", "--run-dir", str(run_dir)]) == 0
    record = json.loads((run_dir / "record.json").read_text())
    reported = record["trials"][0]["history"][-1]["reported"]
    for key in ("val_psnr", "val_assim_psnr", "val_site_rmse", "val_assim_site_rmse"):
        assert np.isfinite(reported[key]), key

    new = generate_patches(3, size=16, scale=4, stations=0, seed=11)
    _lr_input(tmp_path / "lr.nc", new)
    _stations_file(tmp_path / "obs.nc", [4, 10], [5, 1], [[6.0, 7.5], [8.0, 5.5], [9.0, 4.0]])
    out = tmp_path / "out.nc"
    code = main(
        [
            "predict",
            str(run_dir),
            "--input",
            str(tmp_path / "lr.nc"),
            "--output",
            str(out),
            "--stations",
            str(tmp_path / "obs.nc"),
        ]
    )
    assert code == 0
    with h5netcdf.File(out, "r") as handle:
        assert handle.attrs["Conventions"] == "CF-1.8"
        speed = handle.variables["wind_speed"]
        assert speed.dimensions == ("time", "y", "x")
        assert speed.attrs["units"] == "m s-1" and speed.attrs["standard_name"] == "wind_speed"
        assert handle.variables["x"].attrs["units"] == "m"
        # HR cell centres inside the LR cells: 1 km cells at 4x are 250 m cells from 125 m.
        np.testing.assert_allclose(handle.variables["x"][:4], [125.0, 375.0, 625.0, 875.0])
        assert handle.variables["time"].attrs["units"].startswith("hours since")
        plain = np.asarray(speed[:])
        assimilated = np.asarray(handle.variables["wind_speed_assimilated"][:])

    # The same checkpoint applied in-process to the same (decoded) fields gives the same values.
    from faasml.results import TrialCheckpoint, load_checkpoint
    from faasml.workloads.windsr.inference import read_inputs

    spec = load_job(job)
    model = create_model("windsr", (6, 16, 16), 2, **dict(spec.model.options))
    assert isinstance(model, WindModel)
    params = load_checkpoint(TrialCheckpoint(record["best"]["checkpoint"], run_dir))
    inputs = read_inputs(tmp_path / "lr.nc", 4, True)
    np.testing.assert_allclose(inputs.patches.lr, new.lr, atol=0.006)
    np.testing.assert_allclose(plain, model.predict(params, inputs.patches), rtol=0, atol=1e-5)
    rows, cols = np.array([[4, 10]] * 3), np.array([[5, 1]] * 3)
    readings = np.array([[6.0, 7.5], [8.0, 5.5], [9.0, 4.0]], np.float32)
    with_obs = WindPatches(
        inputs.patches.hr,
        inputs.patches.lr,
        inputs.patches.terrain,
        inputs.patches.truth,
        rows,
        cols,
        readings,
    )
    expected = model.predict(params, with_obs, assimilate="dynamic")
    np.testing.assert_allclose(assimilated, expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(assimilated[np.arange(3)[:, None], rows, cols], readings, atol=1e-4)

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        args = ["predict", str(run_dir), "--input", str(tmp_path / "lr.nc"), "--output", str(out)]
        assert main([*args, "--trial", "7"]) == 2
    assert "the value of --trial is 7, but must be a trial of" in err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1

    # As a tuning run records a tuned width: the job's model says 16, the best trial's
    # configuration 8. The report's maps and predict build the trial's model, not the job's.
    record["job"]["model"]["width"] = 16
    record["best"]["config"] = record["trials"][0]["config"] = {"model.width": 8}
    (run_dir / "record.json").write_text(json.dumps(record))
    maps = run_dir / "plots" / "windsr-maps.png"
    maps.unlink()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", str(run_dir)]) == 0
        assert main([*args, "--trial", "0"]) == 0
    assert maps.stat().st_size > 1000
    with h5netcdf.File(out, "r") as handle:
        np.testing.assert_allclose(np.asarray(handle.variables["wind_speed"][:]), plain)


def test_an_input_without_terrain_or_with_packed_nonsense_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    from faasml.workloads.windsr.inference import read_inputs, write_prediction

    path = tmp_path / "lr.nc"
    with h5netcdf.File(path, "w") as handle:
        handle.dimensions = {"sample": 2, "y_lr": 4, "x_lr": 4}
        lr = handle.create_variable(
            "wind_speed_lr", ("sample", "y_lr", "x_lr"), data=np.full((2, 4, 4), 7.0, np.float32)
        )
        lr.attrs["units"] = "m/s"
    with pytest.raises(ConfigError, match=r"lr\.nc: variable 'terrain' is missing; the model"):
        read_inputs(path, 4, terrain_needed=True)
    inputs = read_inputs(path, 4, terrain_needed=False)  # an SR-CNN without terrain
    assert inputs.patches.terrain.shape == (2, 16, 16) and not inputs.patches.terrain.any()
    assert inputs.x.attrs["units"] == "1" and inputs.time is None
    field = {"wind_speed": (inputs.patches.hr, "super-resolved wind speed")}
    with pytest.raises(
        ConfigError, match=r"cannot write .*out\.nc: the folder .*absent does not exist"
    ):
        write_prediction(tmp_path / "absent" / "out.nc", inputs, field, {})
    write_prediction(tmp_path / "out.nc", inputs, field, {"title": "t"})
    with h5netcdf.File(tmp_path / "out.nc", "r") as handle:
        assert handle.variables["wind_speed"].dimensions == ("sample", "y", "x")
        assert handle.variables["x"].attrs["axis"] == "X"
    assert not list(tmp_path.glob("*.partial"))
    with h5netcdf.File(path, "a") as handle:
        handle.variables["wind_speed_lr"].attrs["scale_factor"] = np.float32(100.0)
    with pytest.raises(ConfigError) as caught:
        read_inputs(path, 4, terrain_needed=False)
    assert "variable 'wind_speed_lr' has values in [700, 700] m s-1, but a wind speed" in str(
        caught.value
    )
