"""A deadline refused with advice that can be followed (issue 34 item 5): the refusal after
measuring the job says what the measuring took and what the shortest plan needs more, and a
deadline the measuring alone is expected to use up is refused before anything is paid. The
measuring's time is injected (the profile's ``profiling_s``, the cache's), never timed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.cli.main import main
from faasml.exceptions import InfeasibleConstraintError
from faasml.job import from_mapping
from faasml.runtime.profile.measure import measure_job
from faasml.runtime.runs.session import TuneRun
from faasml.types import Constraint
from faasml.units import format_duration

from .tiny_jobs import tiny_tune_job

TOOK_S = 21.4
"""How long measuring the job took (injected)."""

COORDINATOR_S = 0.05
"""The coordinator's seconds between segments (injected: a run times a record write to
learn them, and two runs on a busy machine would plan with different figures)."""


def _steady_coordinator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "faasml.runtime.runs.planning.coordinator_write_s", lambda *args: COORDINATOR_S
    )


def _job(name: str) -> dict[str, Any]:
    return {**tiny_tune_job(name), "catalog": "local"}


@pytest.fixture
def measured_slowly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs measure the job (in a cache of the test's own) and it took TOOK_S."""
    monkeypatch.setenv("FAASML_CACHE", str(tmp_path / "cache"))

    def slow(*args: Any, **kwargs: Any) -> Any:
        profile = measure_job(*args, **kwargs)
        return dataclasses.replace(profile, profiling_s=TOOK_S, cached=False)

    monkeypatch.setattr("faasml.runtime.runs.base.measure_job", slow)
    _steady_coordinator(monkeypatch)


@pytest.mark.usefixtures("measured_slowly")
def test_the_refusal_says_what_profiling_took_and_its_advice_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = from_mapping(_job("deadline-after-profiling"))
    deadline = TOOK_S + 0.05  # measuring leaves 50 ms: no plan fits
    run = TuneRun(job, Constraint(deadline_s=deadline), tmp_path / "run")
    with pytest.raises(InfeasibleConstraintError) as caught:
        run.plan()
    message = str(caught.value)
    assert f"profiling took 21.4 s of the {deadline:.1f} s deadline; the shortest plan needs" in (
        message
    )
    least = caught.value.least_deadline_s
    assert least is not None and least > TOOK_S
    shortest = least - TOOK_S
    assert f"a run that finds it there needs {format_duration(shortest)})" in message
    # The advice holds: the profile is cached now, and the shortest plan's time is enough.
    monkeypatch.undo()
    monkeypatch.setenv("FAASML_CACHE", str(tmp_path / "cache"))
    _steady_coordinator(monkeypatch)
    again = TuneRun(job, Constraint(deadline_s=shortest * 1.01), tmp_path / "again")
    plan = again.plan()
    assert again.record.profile_cached is True
    assert plan.time_s <= shortest * 1.01


@pytest.mark.usefixtures("measured_slowly")
def test_the_command_prints_what_profiling_took(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_job("deadline-cli")))
    code = main(["tune", str(job), "--deadline", "21.45", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert "profiling took 21.4 s of the 21.4 s deadline; the shortest plan needs" in err


def test_a_deadline_measuring_would_use_up_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache says measuring a job took 30 s here: a 20 s deadline for a job not in it is
    refused at once, and nothing is measured (the cache gains no profile)."""
    cache = tmp_path / "cache"
    (cache / "profiles").mkdir(parents=True)
    (cache / "profiles" / "another-job.json").write_text(json.dumps({"profiling_s": 30.0}))
    monkeypatch.setenv("FAASML_CACHE", str(cache))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_job("deadline-early")))
    code = main(["tune", str(job), "--deadline", "20", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert "the deadline of 20.0 s would be spent measuring job deadline-early" in err
    assert "measuring takes at least 30.0 s (the quickest job measured on this machine)" in err
    assert [p.name for p in (cache / "profiles").iterdir()] == ["another-job.json"]
