"""The WindSR job files run end to end through the CLI on the local platform (real functions)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.cli.main import main
from faasml.job import load_job
from faasml.workloads.build import load_data
from faasml.workloads.windsr import generate_patches, write_patches

pytest.importorskip("torch")
pytest.importorskip("skimage")
pytest.importorskip("h5py")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = {"samples": 40, "size": 16, "test_fraction": 0.2}
MODEL = {"width": 8, "levels": 2, "timesteps": 50, "sample_steps": 3, "eval_images": 8}


def _example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def test_the_example_jobs_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["job", "check", str(EXAMPLES / "train-windsr.yaml")]) == 0
    assert "windsr: 367,233 parameters" in capsys.readouterr().out
    assert (
        main(["job", "check", str(EXAMPLES / "tune-windsr.yaml"), "--set", "tuning.trials=2"]) == 0
    )


def test_a_model_and_data_of_different_scales_are_refused(tmp_path: Path) -> None:
    job = _example("train-windsr.yaml")
    job["dataset"] = {**job["dataset"], **SMALL, "scale": 2}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["job", "check", str(path)]) == 2
    assert "not constant over 4×4 blocks: set model.scale" in err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1


def test_a_windsr_file_is_read_by_its_suffix(tmp_path: Path) -> None:
    write_patches(tmp_path / "wind.h5", generate_patches(12, size=16, seed=4))
    job = _example("train-windsr.yaml")
    job["dataset"] = {"path": "wind.h5", "test_fraction": 0.25}
    job["batch_size"] = 4
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    spec = load_job(path)
    assert spec.dataset.format == "windsr"
    train, test = load_data(spec.dataset)
    assert (len(train), len(test)) == (9, 3) and train.input_shape == (6, 16, 16)


def test_train_windsr_runs_end_to_end(tmp_path: Path) -> None:
    job = _example("train-windsr.yaml")
    job["dataset"] = {**job["dataset"], **SMALL}
    job["model"] = {**job["model"], **MODEL}
    job["batch_size"] = 8
    job["training"] = {"max_epochs": 2}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    run_dir = tmp_path / "run"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["train", str(path), "--budget", "1", "--run-dir", str(run_dir)])
    record = json.loads((run_dir / "record.json").read_text())
    assert code == 0 and record["status"] == "finished"
    history = record["trials"][0]["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    for epoch in history:
        reported = epoch["reported"]
        assert math.isfinite(reported["val_psnr"]) and math.isfinite(reported["val_bicubic_psnr"])
        assert reported["val_ssim"] == pytest.approx(epoch["val_accuracy"])
    assert history[-1]["val_loss"] < history[0]["loss"]  # below the first epoch's mean loss
    maps = run_dir / "plots" / "windsr-maps.png"
    assert maps.stat().st_size > 1000
    assert "plots/windsr-maps.png" in (run_dir / "report.md").read_text()
