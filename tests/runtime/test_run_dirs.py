"""Run directories: a new run never writes over another, a bad record is a one-line error, and
what a run writes is readable by others (0644 under umask 022) and written atomically."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import faasml
from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.runs.session import resume_run

EXAMPLE = Path(__file__).parents[2] / "examples" / "tune-logreg.yaml"


def _job(folder: Path) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["dataset"]["samples"] = 600
    data["tuning"].update(trials=2, stages=1)
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(job file, run directory) of one finished tuning run, written under umask 022."""
    folder = tmp_path_factory.mktemp("finished")
    job = _job(folder)
    previous = os.umask(0o022)
    try:
        assert main(["tune", str(job), "--budget", "1", "--run-dir", str(folder / "run")]) == 0
    finally:
        os.umask(previous)
    yield job, folder / "run"


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert "Plan" not in captured.out and "Traceback" not in captured.err
    return lines[0]


def test_record_report_and_plots_are_readable_by_others(finished: tuple[Path, Path]) -> None:
    _, run = finished
    for name in ("record.json", "report.md", "plots/loss.png"):
        assert stat.S_IMODE((run / name).stat().st_mode) == 0o644, name
    assert not [p.name for p in run.iterdir() if p.name.startswith(".")]  # no temporary left


@pytest.mark.parametrize("command", ["tune", "train"])
def test_a_finished_run_is_not_overwritten(
    finished: tuple[Path, Path], capsys: pytest.CaptureFixture[str], command: str
) -> None:
    job, run = finished
    before = {p: p.read_bytes() for p in (run / "record.json", run / "report.md")}
    assert main([command, str(job), "--budget", "1", "--run-dir", str(run)]) == 2
    error = _error(capsys)
    assert f"{run} already holds a tune run (finished)" in error
    assert "choose another --run-dir (or pass --force" in error
    assert {p: p.read_bytes() for p in before} == before


def test_force_overwrites_and_an_interrupted_run_says_how_to_resume(
    finished: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job, run = finished
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    record = json.loads((copy / "record.json").read_text())
    (copy / "record.json").write_text(json.dumps({**record, "status": "running"}))
    assert main(["tune", str(job), "--budget", "1", "--run-dir", str(copy)]) == 2
    assert f"continue it with: faasml resume {copy}" in _error(capsys)
    assert resume_run(copy).record.status == "running"  # the advice works
    assert main(["tune", str(job), "--budget", "1", "--run-dir", str(copy), "--force"]) == 0
    assert json.loads((copy / "record.json").read_text())["status"] == "finished"


def test_the_python_api_refuses_a_folder_that_holds_a_run(finished: tuple[Path, Path]) -> None:
    job, run = finished
    tuner = faasml.Tuner(job, tune_config=faasml.TuneConfig(budget=1.0), run_dir=run)
    with pytest.raises(ConfigError, match="already holds a tune run"):
        tuner.fit()


@pytest.mark.parametrize("command", ["tune", "train"])
def test_a_run_dir_that_is_a_file_fails_before_planning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    assert main([command, str(_job(tmp_path)), "--budget", "1", "--run-dir", str(target)]) == 2
    assert f"the run directory {target} is a file" in _error(capsys)
    inside = target / "run"
    assert main([command, str(_job(tmp_path)), "--budget", "1", "--run-dir", str(inside)]) == 2
    assert f"{target} is a file" in _error(capsys)
    assert target.read_text() == "mine"


def test_other_files_are_not_written_over_but_an_empty_folder_is_used(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="is not empty and holds no run"):
        RunDir(tmp_path / "mine").check_new()
    RunDir(tmp_path / "mine").check_new(force=True)
    (tmp_path / "empty").mkdir()
    RunDir(tmp_path / "empty").check_new()
    RunDir(tmp_path / "new" / "deeper").check_new()


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("{}", r"record.kind is missing"),
        ("[]", r"record must be a mapping of fields, not list"),
        ('{"kind": "tune"}', r"record.status is missing"),
        ("{not json", r"is not valid JSON"),
        ("1" * 5000, r"cannot read .*record.json"),
        ("[" * 100_000, r"cannot read .*record.json|is not valid JSON"),
    ],
)
def test_resume_of_a_malformed_record_names_the_file_and_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, rule: str
) -> None:
    (tmp_path / "record.json").write_text(text)
    assert main(["resume", str(tmp_path)]) == 2
    error = _error(capsys)
    assert str(tmp_path / "record.json") in error
    assert re.search(rule, error), error


def test_resume_names_a_missing_part_of_a_real_record(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    _, run = finished
    record = json.loads((run / "record.json").read_text())
    for key, rule in (
        ("constraint", "record.constraint is missing"),
        ("trials", "record.trials is missing"),
        ("charges", "record.charges is missing"),
    ):
        (tmp_path / "record.json").write_text(
            json.dumps({k: v for k, v in record.items() if k != key})
        )
        with pytest.raises(ConfigError, match=rule):
            resume_run(tmp_path)
    broken = {**record, "status": "running", "trials": [{**record["trials"][0], "extra": 1}]}
    (tmp_path / "record.json").write_text(json.dumps(broken))
    with pytest.raises(ConfigError, match=r"record.trials\[0\] has unknown field\(s\): extra"):
        resume_run(tmp_path)
