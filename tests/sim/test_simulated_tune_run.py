"""The real ``TuneRun`` (planning, budget guard, re-calibration, record) driven end to end on
the simulated platform: its functions simulated, its time the platform's virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.exceptions import ConfigError, InfeasibleConstraintError
from faasml.job import load_job
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.sim.run import simulated_tune_run
from faasml.types import Constraint

JOB: dict[str, Any] = {
    "name": "sim-tune",
    "model": "logistic-regression",
    "dataset": {"synthetic": "higgs-like", "samples": 4000, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.5},
    "search_space": {"optimizer.lr": {"loguniform": [0.001, 1.0]}},
    "tuning": {"trials": 8, "reduction_factor": 2, "epochs_per_stage": 2},
    "batch_size": 100,
    "seed": 3,
    "platform": "local",
    "catalog": "local",
    "profile": "lr-higgs",
}


def _run(
    folder: Path, budget: float = 0.05, job: dict[str, Any] | None = None, **options: Any
) -> RunRecord:
    folder.mkdir(parents=True, exist_ok=True)
    job_file = folder / "job.yaml"
    job_file.write_text(yaml.safe_dump(job or JOB))
    run = simulated_tune_run(
        load_job(job_file), Constraint(budget_usd=budget), folder / "run", **options
    )
    run.plan()
    return run.execute()


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    return _run(tmp_path_factory.mktemp("sim"), seed=1)


def test_the_run_follows_its_plan_stage_by_stage(record: RunRecord) -> None:
    assert record.status == "finished" and record.stop_reason is None
    assert record.plan is not None
    stages = record.plan.stages
    assert len(stages) >= 2 and [s.trials for s in stages[:2]] == [8, 4]
    assert all(s.measured is not None and s.measured.time_s > 0 for s in stages)
    # Successive halving for real: the trials each stage kept trained on, the rest stopped.
    epochs = [t.epochs_done for t in record.trials]
    for index, stage in enumerate(stages):
        reached = sum(s.epochs for s in stages[: index + 1])
        assert sum(e >= reached for e in epochs) == stage.trials
    assert sum(t.status == "pruned" for t in record.trials) == 8 - stages[-1].trials


def test_the_best_trial_is_the_one_trained_to_the_end(record: RunRecord) -> None:
    assert record.best is not None and record.best.val_loss is not None
    most = max(t.epochs_done for t in record.trials)
    last = {t.trial_id: t.history[-1]["val_loss"] for t in record.trials if t.epochs_done == most}
    assert record.best.trial == min(last, key=lambda trial: last[trial])
    assert record.best.val_loss == last[record.best.trial]


def test_the_run_is_billed_on_virtual_time_within_its_budget(record: RunRecord) -> None:
    billed = sum(c.usd for c in record.charges)
    assert 0 < billed <= 0.05
    assert record.elapsed_s == pytest.approx(
        sum(s.measured.time_s + (s.measured_between_s or 0.0) for s in record.plan.stages),
        rel=0.05,
    )


def test_the_same_seed_gives_the_same_run(tmp_path: Path, record: RunRecord) -> None:
    again = _run(tmp_path / "again", seed=1)
    other = _run(tmp_path / "other", seed=2)
    assert again.plan is not None and other.plan is not None and record.plan is not None
    assert [s.measured for s in again.plan.stages] == [s.measured for s in record.plan.stages]
    assert again.best is not None and record.best is not None
    assert again.best.trial == record.best.trial
    assert [s.measured for s in other.plan.stages] != [s.measured for s in record.plan.stages]


def test_a_budget_the_plan_cannot_meet_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(InfeasibleConstraintError) as refused:
        _run(tmp_path, budget=1e-9)
    assert "budget" in str(refused.value)


def test_its_record_is_a_run_directory_like_any(tmp_path: Path) -> None:
    _run(tmp_path, noise=0.0, cold_start_noise=0.0)
    assert RunDir(tmp_path / "run").read_record().status == "finished"


def test_bad_noise_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="noise is -1"):
        _run(tmp_path, noise=-1.0)


def test_segments_of_several_epochs_record_every_epoch(tmp_path: Path) -> None:
    from faasml.runtime.coordinator import CoordinatorOptions

    record = _run(tmp_path, options=CoordinatorOptions(epochs_per_segment=2))
    assert record.status == "finished"
    trained = [t for t in record.trials if t.epochs_done > 0]
    assert trained
    for trial in trained:
        assert [h["epoch"] for h in trial.history] == list(range(1, trial.epochs_done + 1))
        assert all(h["val_loss"] is not None and h["loss"] > 0 for h in trial.history)


def test_a_job_ranked_by_accuracy_gets_an_accuracy_from_every_trial(tmp_path: Path) -> None:
    job = {**JOB, "tuning": {**JOB["tuning"], "metric": "accuracy"}}
    record = _run(tmp_path, job=job)
    assert record.status == "finished"
    assert not [e.text for e in record.events if "reported no" in e.text]
    assert record.best is not None and record.best.val_accuracy is not None
    finals = [t.history[-1]["val_accuracy"] for t in record.trials if t.history]
    assert record.best.val_accuracy == max(finals)
