"""`faasml tune --hyperband [R]`: the job file's successive halving run as Hyperband's brackets,
as ``tuning.hyperband: R`` in the file would run it; bad values refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main

from .tiny_jobs import four_trial_tune_job


def _job(tmp_path: Path, name: str) -> Path:
    job = tmp_path / f"{name}.yaml"
    job.write_text(yaml.safe_dump(four_trial_tune_job(name, epochs_per_stage=1)))
    return job


def _tune(job: Path, run_dir: Path, *flags: str) -> dict[str, object]:
    argv = ["tune", str(job), "--budget", "0.05", "--run-dir", str(run_dir), *flags]
    assert main(argv) == 0
    record: dict[str, object] = json.loads((run_dir / "record.json").read_text())
    return record


def test_hyperband_r_runs_the_brackets_the_job_file_would(tmp_path: Path) -> None:
    # The file: successive halving of 4 trials in 2 stages; --set still sets its fields.
    job = _job(tmp_path, "hb-r")
    flags = ("--hyperband", "3", "--set", "tuning.reduction_factor=3")
    record = _tune(job, tmp_path / "run", *flags)
    assert record["status"] == "finished"
    tuning = record["job"]["tuning"]  # type: ignore[index]
    assert tuning["hyperband"] == 3 and "trials" not in tuning and "stages" not in tuning
    assert tuning["reduction_factor"] == 3
    # Hyperband(R = 3, η = 3): a bracket of 3 trials of 1 epoch, the best 1 trained to 3 epochs;
    # a bracket of 2 trials of 3 epochs: what `tuning.hyperband: 3` in the file plans.
    stages = [(s["trials"], s["epochs"]) for s in record["plan"]["stages"]]  # type: ignore[index]
    assert stages == [(3, 1), (1, 2), (2, 3)]
    trials = record["trials"]
    assert sorted(len(t["history"]) for t in trials[:3]) == [1, 1, 3]  # type: ignore[index]
    assert [len(t["history"]) for t in trials[3:]] == [3, 3]  # type: ignore[index]


def test_hyperband_alone_takes_the_epochs_the_jobs_last_stage_trains(tmp_path: Path) -> None:
    # 2 stages of 1 epoch: a trial that survives trains 2 epochs, Hyperband's R.
    record = _tune(_job(tmp_path, "hb-alone"), tmp_path / "run", "--hyperband")
    assert record["job"]["tuning"]["hyperband"] == 2  # type: ignore[index]
    stages = [(s["trials"], s["epochs"]) for s in record["plan"]["stages"]]  # type: ignore[index]
    assert stages == [(2, 1), (1, 1), (2, 2)]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--hyperband", "0"], "the value of --hyperband is '0', but must be an integer R >= 1"),
        (["--hyperband", "three"], "the value of --hyperband is 'three', but must be an integer"),
        (
            ["--hyperband", "3", "--set", "tuning.trials=8"],
            "--hyperband sets the brackets' trials, stages and epochs; leave out --set "
            "tuning.trials",
        ),
    ],
)
def test_a_bad_hyperband_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    argv = ["tune", str(_job(tmp_path, "hb-bad")), "--budget", "0.05", *flags]
    argv += ["--run-dir", str(tmp_path / "run")]
    try:
        code = main(argv)
    except SystemExit as usage:  # argparse's refusal of the value
        code = int(usage.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    assert said in err and err.count("error:") == 1
    assert not (tmp_path / "run" / "record.json").exists()
