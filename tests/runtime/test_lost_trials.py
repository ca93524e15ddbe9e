"""A run that lost trials says so (issue 34): the command exits 1 with one line naming them, and
``Tuner.fit`` raises ``TrialsLostError`` carrying the results. The loss is real: a worker of one
trial is killed at its first round on every try (``worker_faults``), past ``max_restarts``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import faasml
from faasml.cli.main import main
from faasml.exceptions import TrialsLostError
from faasml.job import from_mapping
from faasml.runtime.coordinator import TrialFault
from faasml.runtime.function.worker import Fault
from faasml.runtime.runs.tune import TuneRun

from .tiny_jobs import tiny_tune_job

TRIES = 8
"""More tries than trial 1 can have: four counted (the default ``max_restarts`` is 3) and, on a
busy machine, up to two synchronisation failures before it moves to fewer functions (a peer
that gave up waiting for a worker still starting), each of which takes a fault unused."""


class _KillingTrialOne(TuneRun):
    """A tuning run whose trial 1 has its worker 0 killed at its first round on every try: it
    fails, trial 0 trains."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kill = Fault(worker_id=0, round_id=0, during="compute")
        super().__init__(*args, **kwargs, faults=[TrialFault(1, 0, kill) for _ in range(TRIES)])


def _job() -> dict[str, Any]:
    return {**tiny_tune_job("lost-trials"), "catalog": "local"}


def test_the_command_exits_1_with_the_trials_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("faasml.cli.run.TuneRun", _KillingTrialOne)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_job()))
    code = main(["tune", str(job), "--budget", "0.05", "--run-dir", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 1
    lost = r"LOST: 1 of 2 trials failed: trial 1 after repeated restarts \(\d+ killed"
    assert re.search(lost, out)


def test_fit_raises_trials_lost_with_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("faasml.runtime.runs.session.TuneRun", _KillingTrialOne)
    tuner = faasml.Tuner(
        from_mapping(_job()),
        tune_config=faasml.TuneConfig(budget=0.05, num_samples=2),
        run_dir=tmp_path / "run",
    )
    with pytest.raises(TrialsLostError, match="1 of 2 trials failed: trial 1 ") as caught:
        tuner.fit()
    results = caught.value.results
    assert isinstance(results, faasml.ResultGrid)
    assert [r.status for r in results.results] == ["done", "failed"]
    assert results.get_best_result().trial_id == 0  # the trial that trained is still ranked
