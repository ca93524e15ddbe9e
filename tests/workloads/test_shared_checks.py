"""`faasml job check`, `tune` and `train` refuse the same jobs with the same one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.job import load_job
from faasml.workloads.data import higgs_like, write_libsvm

EXAMPLE = Path(__file__).parents[2] / "examples" / "tune-logreg.yaml"

BAD = [
    ("platform", "bogus", r"the value of platform is 'bogus', but must be one of: .*local"),
    ("catalog", "abc", r"the value of catalog is 'abc', but unknown catalog 'abc'"),
    ("profile", "bogus", r"the value of profile is 'bogus', but unknown workload 'bogus'"),
    ("batch_size", 10**7, r"batch_size is 10000000, but must be <= the 1,600 training samples"),
    ("tuning.reduction_factor", 10**7, r"reduction_factor is 10000000, but must be <= 16"),
    ("tuning.trials", 10**9, r"tuning.trials is 1000000000, but must be <= 100000"),
    ("catalog", "aws-lambda", r"through embedded, but catalog aws-lambda prices no storage"),
]


def _job(tmp_path: Path, field: str, value: object) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["dataset"]["samples"] = 2000
    section, _, key = field.rpartition(".")
    (data.setdefault(section, {}) if section else data)[key] = value
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("field", "value", "rule"), BAD)
def test_job_check_and_tune_refuse_the_same_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, rule: str
) -> None:
    path = _job(tmp_path, field, value)
    with pytest.raises(ConfigError, match=rule):
        load_job(path, environ={})
    errors = []
    for command in (
        ["job", "check", str(path)],
        ["tune", str(path), "--budget", "1", "--run-dir", str(tmp_path / "run")],
        ["train", str(path), "--budget", "1", "--run-dir", str(tmp_path / "run")],
    ):
        assert main(command) == 2
        captured = capsys.readouterr()
        assert "Plan" not in captured.out
        errors.append(" ".join(captured.err.split()))
    assert errors[0] == errors[1] == errors[2]
    assert not (tmp_path / "run").exists()


def test_the_batch_size_of_a_file_is_checked_once_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_libsvm(tmp_path / "data.libsvm", higgs_like(50, features=3, seed=1))
    data = {
        "name": "file",
        "model": "logistic-regression",
        "dataset": {"path": "data.libsvm", "format": "libsvm"},
        "optimizer": {"lr": 0.1},
        "batch_size": 41,
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["job", "check", str(path)]) == 2
    assert "must be <= the 40 training samples" in capsys.readouterr().err
    data["batch_size"] = 40
    path.write_text(yaml.safe_dump(data))
    assert main(["job", "check", str(path)]) == 0


def test_no_training_sample_left_is_refused(tmp_path: Path) -> None:
    path = _job(tmp_path, "dataset.test_fraction", 0.9)
    data = yaml.safe_load(path.read_text())
    data["dataset"]["samples"] = 2
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="leaves no training sample"):
        load_job(path, environ={})
