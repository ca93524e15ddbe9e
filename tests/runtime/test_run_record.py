"""The typed run record: records of the shape written before it had a schema version load,
report and resume; a damaged record is one line naming what is wrong; mutated records load or
fail so, never with another exception."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faasml.cli.main import main
from faasml.exceptions import RecordError
from faasml.job import load_job
from faasml.reports.run_report import render_report
from faasml.reports.run_summary import summary_lines
from faasml.runtime.record.codec import SCHEMA_VERSION, record_from_json, record_to_json
from faasml.runtime.record.records import Best, RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.runs.session import TuneRun
from faasml.testing.mutation import mutate
from faasml.types import Allocation, Constraint

from .tiny_jobs import four_trial_tune_job

RECORDS = Path(__file__).parent / "records"
FIXTURES = ["v0-tune.json", "v0-train.json", "v0-workflow.json", "v0-before-plan.json"]
"""Records written by faasml before the typed record (``faasml tune|train`` on tiny jobs, and
a tune refused for its budget after the profile was saved): no ``schema_version``."""


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDS / name).read_text())
    assert "schema_version" not in data  # the shape before the field
    return data


@pytest.mark.parametrize("name", FIXTURES)
def test_a_record_of_the_version_before_loads_typed_and_writes_back_the_same(name: str) -> None:
    data = _fixture(name)
    record = record_from_json(data)
    assert isinstance(record, RunRecord)
    if record.plan is not None:  # the plan is typed through: no dicts to rebuild from
        assert all(isinstance(s.allocation, Allocation) for s in record.plan.stages)
    again = json.loads(json.dumps(record_to_json(record)))
    counts = {"restarts": 0, "segments": 0, "cold_starts": 0}  # 0 before the run opens
    assert again == {**counts, **data, "schema_version": SCHEMA_VERSION}


@pytest.mark.parametrize("name", FIXTURES)
def test_a_record_of_the_version_before_reports(name: str) -> None:
    record = record_from_json(_fixture(name))
    report = render_report(record, [])
    assert f"Status: **{record.status}**" in report
    assert "## Plan against actual" in report
    assert summary_lines(record)[0].startswith(record.status)


def test_the_stages_keep_planned_repredicted_and_measured_apart() -> None:
    record = record_from_json(_fixture("v0-tune.json"))
    assert record.plan is not None
    first, second = record.plan.stages
    assert first.predicted is not None and first.measured is not None and first.repredicted is None
    assert second.repredicted is not None and second.measured is not None
    assert second.predicted is not None and second.predicted != second.repredicted


def test_a_record_saved_before_its_plan_resumes_and_plans_afresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`faasml tune JOB --budget 0.0000001` measured the job, saved its record and was refused
    the plan; resuming it with a budget plans and runs (it was a KeyError on 'plan')."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(RECORDS / "v0-before-plan.json", run_dir / "record.json")
    assert main(["resume", str(run_dir), "--budget", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "Plan (exact) for fixture-tune" in out
    record = json.loads((run_dir / "record.json").read_text())
    assert record["schema_version"] == SCHEMA_VERSION
    assert record["status"] == "finished" and len(record["plan"]["stages"]) == 2
    assert record["constraint"]["budget_usd"] == 0.05


def test_a_record_saved_before_its_plan_is_refused_in_one_line_where_still_infeasible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(RECORDS / "v0-before-plan.json", run_dir / "record.json")
    assert main(["resume", str(run_dir), "--budget", "0.0000001"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and "budget" in error


def _damaged(data: dict[str, Any], how: str) -> dict[str, Any]:
    data = copy.deepcopy(data)
    if how == "kind":
        data["kind"] = "train"
    elif how == "address":
        data["platform_options"] = {"address": "ray://head:10001"}
    elif how == "best-failed":
        best = data["best"]["trial"]
        data["trials"][best]["status"] = "failed"
    elif how == "best-missing":
        data["best"]["trial"] = 99
    elif how == "negative-charge":
        data["charges"][0]["usd"] = -0.5
    elif how == "missing":
        del data["constraint"]
    elif how == "type":
        data["elapsed_s"] = "fast"
    elif how == "stage-type":
        data["plan"]["stages"][1]["allocation"]["n"] = "two"
    elif how == "newer":
        data["schema_version"] = SCHEMA_VERSION + 1
    elif how == "trial-status":
        data["trials"][0]["status"] = "lost"
    elif how == "history":
        del data["trials"][0]["history"][0]["loss"]
    elif how == "profile":
        data["profile"]["compute_points"] = []
    return data


DAMAGE = {
    "kind": r"record.kind is 'train', but the record holds 4 trials",
    "address": r"record.platform_options.address is 'ray://head:10001', but record.platform is "
    "'local'",
    "best-failed": r"record.best names trial 3, but that trial failed",
    "best-missing": r"record.best names trial 99, which the record lacks",
    "negative-charge": r"record.charges\[0\].usd is -0.5, but must be >= 0",
    "missing": r"record.constraint is missing",
    "type": r"record.elapsed_s is 'fast', but must be a number",
    "stage-type": r"record.plan.stages\[1\].allocation.n is 'two', but must be a whole number",
    "newer": r"schema_version 2: written by a newer faasml",
    "trial-status": r"record.trials\[0\].status is 'lost', but must be one of",
    "history": r"record.trials\[0\].history\[0\].loss is missing",
    "profile": r"its 'profile' is malformed",
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_record_is_one_line_naming_the_field_and_the_rule(
    tmp_path: Path, how: str
) -> None:
    folder = RunDir(tmp_path / "run")
    folder.path.mkdir()
    folder.record_path.write_text(json.dumps(_damaged(_fixture("v0-tune.json"), how)))
    with pytest.raises(RecordError, match=DAMAGE[how]) as caught:
        folder.read_record()
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{folder.record_path} is not a usable")


def test_resume_and_the_command_line_say_a_damaged_record_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    damaged = {**_damaged(_fixture("v0-tune.json"), "kind"), "status": "stopped"}
    (run_dir / "record.json").write_text(json.dumps(damaged))
    assert main(["resume", str(run_dir)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "record.kind is 'train'" in error


def test_a_best_trial_that_fails_mid_stage_gives_way_in_the_record(tmp_path: Path) -> None:
    """The record after a segment never names a failed trial best (a resume would refuse it):
    the best of the others takes its place."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(four_trial_tune_job("best-fails", epochs_per_stage=1)))
    run = TuneRun(load_job(job_file), Constraint(budget_usd=0.05), tmp_path / "run", measure=False)
    run.plan()
    epoch = {"epoch": 1, "loss": 0.7, "t_s": 1.0, "spent_usd": 1e-6, "epoch_s": 0.5}
    for trial, loss in zip(run.trials, (0.5, 0.4, 0.6, 0.7), strict=True):
        trial.history = [{**epoch, "n": 1, "memory_mb": 1024, "val_loss": loss}]
        trial.epochs_done, trial.status = 1, "done"
    run.record.best = Best(1, dict(run.trials[1].config), "loss", 0.4, None, None, 1)
    run.trials[1].status = "failed"  # restarted past the limit in the next stage
    run.save()
    record = RunDir(tmp_path / "run").read_record()
    assert record.best is not None and record.best.trial == 0 and record.best.val_loss == 0.5


# ------------------------------------------------------------------ fuzz

ODD: list[Any] = [None, True, 0, -1, 1, 2.5, -1e-9, 1e308, "", "x", "tune", [], [1], {}, {"a": 1}]
values = st.recursive(
    st.sampled_from(ODD) | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


def _mutate(data: Any, draw: st.DataObject, rounds: int) -> Any:
    """``rounds`` random edits: set, delete, retype, wrap or negate a value anywhere."""
    return mutate(data, draw, rounds, values, ("set", "delete", "text", "wrap", "negate"))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(name=st.sampled_from(FIXTURES), rounds=st.integers(1, 3), data=st.data())
def test_mutated_records_load_or_fail_in_one_line(name: str, rounds: int, data: Any) -> None:
    mutated = _mutate(_fixture(name), data, rounds)
    try:
        record = record_from_json(mutated)
    except RecordError as err:
        assert str(err) and "\n" not in str(err), repr(str(err))
        return
    # What loads is whole: it reports, and writes back to a record that loads the same.
    render_report(record, [])
    summary_lines(record)
    again = record_from_json(json.loads(json.dumps(record_to_json(record))))
    assert record_to_json(again) == record_to_json(record)


def test_a_probe_the_search_shortened_keeps_its_rounds() -> None:
    """A deployment search fits a probe to its dollars by running fewer rounds: the record
    keeps how many (a resumed search weighs it by them); a full probe's record is as before."""
    data = _fixture("v0-workflow.json")
    probes = data["workflow"]["phases"][0]["probes"]
    probes[0]["rounds"] = 1
    record = record_from_json(data)
    assert record.workflow is not None
    kept = record.workflow.phases[0].probes
    assert kept[0].rounds == 1 and all(p.rounds is None for p in kept[1:])
    again = record_to_json(record)["workflow"]["phases"][0]["probes"]
    assert again[0]["rounds"] == 1 and all("rounds" not in p for p in again[1:])
    probes[0]["rounds"] = 0
    with pytest.raises(RecordError, match="rounds"):
        record_from_json(data)
