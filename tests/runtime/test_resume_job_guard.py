"""`faasml resume` runs the job its record holds: an edited job file is refused (unless the user
says to go on with the recorded job), and code a record names runs only under the user's
signature, made when the run began on this machine."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.job import load_job
from faasml.runtime.runs.session import TuneRun, resume_run
from faasml.types import Constraint

from .tiny_jobs import four_trial_tune_job, tiny_tune_job

JOB = four_trial_tune_job("guarded", epochs_per_stage=1)
LR_RANGE = JOB["search_space"]["optimizer.lr"]["loguniform"]


class StoppedRun(TuneRun):
    """A run stopped as a Ctrl-C stops it, once a segment that trained an epoch is recorded
    (on a busy machine the first may have been stopped by its budget reservation)."""

    def _on_segment(self, trial: Any, segment: object) -> None:
        super()._on_segment(trial, segment)
        if trial.epochs_done:
            raise KeyboardInterrupt


def _record(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "record.json").read_text()))


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def stopped(tmp_path: Path) -> tuple[Path, Path]:
    """(job file, run directory) of a real tuning run stopped after its first segment."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(JOB))
    run = StoppedRun(load_job(job_file), Constraint(budget_usd=0.05), tmp_path / "run")
    run.plan()
    with pytest.raises(KeyboardInterrupt):
        run.execute()
    record = _record(tmp_path / "run")
    assert record["status"] == "interrupted"
    assert any(t["epochs_done"] for t in record["trials"])
    return job_file, tmp_path / "run"


def test_an_edited_job_file_is_refused_and_the_flag_resumes_the_recorded_job(
    stopped: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    job_file, run_dir = stopped
    before = _record(run_dir)
    configs = [t["config"] for t in before["trials"]]
    edited = {**JOB, "batch_size": 50}
    edited["search_space"] = {"optimizer.lr": {"loguniform": [0.6, 0.9]}}
    job_file.write_text(yaml.safe_dump(edited))

    assert main(["resume", str(run_dir)]) == 2
    line = _one_error(capsys)
    assert f"the job file {job_file.resolve()} has changed since the run began" in line
    assert "batch_size: 100 in the record, 50 in the file" in line  # the first field that differs
    assert f"faasml resume {run_dir} --ignore-job-file" in line
    assert _record(run_dir) == before  # nothing ran

    assert resume_run(run_dir, ignore_job_file=True).job.batch_size == 100
    assert main(["resume", str(run_dir), "--ignore-job-file"]) == 0
    after = _record(run_dir)
    assert after["status"] == "finished"
    assert [t["config"] for t in after["trials"]] == configs  # the trials the run sampled
    low, high = LR_RANGE
    assert all(low <= t["config"]["optimizer.lr"] <= high for t in after["trials"])
    assert after["job"]["batch_size"] == 100
    assert after["job"]["search_space"] == JOB["search_space"]


def test_a_job_file_changed_in_its_text_only_resumes(
    stopped: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    job_file, run_dir = stopped
    job_file.write_text("# the same job, commented\n" + job_file.read_text())
    run = resume_run(run_dir)  # its fields are the recorded ones: nothing to refuse
    assert run.job.to_dict() == load_job(job_file).to_dict()
    job_file.unlink()  # a job file that is gone: the record's job is the job
    assert resume_run(run_dir).job.batch_size == JOB["batch_size"]


def test_a_job_file_that_no_longer_reads_is_refused_in_one_line(
    stopped: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    job_file, run_dir = stopped
    job_file.write_text(yaml.safe_dump({**JOB, "batch_size": "many"}))
    assert main(["resume", str(run_dir)]) == 2
    line = _one_error(capsys)
    assert "has changed since the run began (it no longer reads as a job: " in line
    assert "batch_size" in line


def _planned(tmp_path: Path, job: dict[str, Any]) -> Path:
    """A real run directory: the job planned from its file, nothing trained yet."""
    tmp_path.mkdir(exist_ok=True)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(job))
    TuneRun(load_job(job_file), Constraint(budget_usd=0.05), tmp_path / "run").plan()
    return tmp_path / "run"


@pytest.mark.parametrize("signature", ["removed", "kept", "garbage"])
def test_a_record_naming_code_it_was_not_signed_for_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signature: str
) -> None:
    run_dir = _planned(tmp_path, tiny_tune_job("crafted"))
    record = _record(run_dir)
    assert "job_signature" not in record  # a job of built-in models names no code to sign
    marker = tmp_path / "pwned"
    record["job"]["model"] = {"name": "os:system", "command": f"touch {marker}"}
    record["job_source"] = None  # no job file: the record alone says what runs
    if signature == "kept":  # the signature of the user's own job, moved onto this one
        own = _planned(tmp_path / "own", {**tiny_tune_job("own"), "model": USER_MODEL})
        record["job_signature"] = _record(own)["job_signature"]
    elif signature == "garbage":
        record["job_signature"] = "00" * 32
    (run_dir / "record.json").write_text(json.dumps(record))

    assert main(["resume", str(run_dir)]) == 2
    assert not marker.exists()  # the record's code never ran
    line = _one_error(capsys)
    assert line.startswith(
        f"error: refusing to run code named by the record {run_dir / 'record.json'} "
        "(job.model.name = 'os:system'): it is not signed"
    )
    assert line.endswith(
        "so it was not written by a run of yours on this machine; run it again from the job file"
    )


def test_a_record_naming_an_edited_job_file_that_names_code_does_not_read_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record of built-in models names no code, so it carries no signature; a job file it
    names that does name code is not read (reading it builds its model) but refused."""
    run_dir = _planned(tmp_path, tiny_tune_job("crafted"))
    marker = tmp_path / "pwned"
    crafted = {
        **tiny_tune_job("crafted"),
        "model": {"name": "os:system", "command": f"touch {marker}"},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(crafted))
    assert main(["resume", str(run_dir)]) == 2
    assert not marker.exists()
    line = _one_error(capsys)
    assert "has changed since the run began (model.name names 'os:system' in the file" in line


USER_MODEL = "faasml.testing.models:reporting_logreg"


def test_the_users_own_record_naming_code_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _planned(tmp_path, {**tiny_tune_job("own"), "model": USER_MODEL})
    record = _record(run_dir)
    assert record["job"]["model"]["name"] == USER_MODEL and record["job_signature"]
    assert main(["resume", str(run_dir)]) == 0
    after = _record(run_dir)
    assert after["status"] == "finished"
    assert all(math.isfinite(t["history"][-1]["val_loss"]) for t in after["trials"])

    # The same record with its job changed by hand: its signature no longer holds.
    copy = tmp_path / "copy"
    copy.mkdir()
    record["job"]["batch_size"] = 50
    (copy / "record.json").write_text(json.dumps(record))
    assert main(["resume", str(copy)]) == 2
    assert "refusing to run code named by the record" in _one_error(capsys)


def test_a_store_password_from_the_environment_is_taken_again_not_from_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record keeps a store URL with its password redacted; the resumed job takes the
    password from the environment again, or says which variable to set."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(tiny_tune_job("stored")))
    url = "memcached://app:secret@127.0.0.1:11299"  # a Redis URL may hold none: REDISCLI_AUTH
    monkeypatch.setenv("FAASML_STORE", url)
    # Planned from the named profile (measure=False): no store is reached by this test.
    run = TuneRun(load_job(job_file), Constraint(budget_usd=0.05), tmp_path / "run", measure=False)
    run.plan()
    assert _record(tmp_path / "run")["job"]["store"] == "memcached://app:***@127.0.0.1:11299"
    assert resume_run(tmp_path / "run").job.store == url
    monkeypatch.delenv("FAASML_STORE")
    with pytest.raises(ConfigError, match="the record keeps no password: set FAASML_STORE to"):
        resume_run(tmp_path / "run")
