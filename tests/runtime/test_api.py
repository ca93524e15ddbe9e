"""The Ray-Tune-shaped Python API runs a real tuning job; report() carries model metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

import faasml
from faasml.exceptions import ConfigError, FaasmlError
from faasml.job import from_mapping

JOB = {
    "name": "api-tune",
    "model": "faasml.testing.models:reporting_logreg",
    "dataset": {"synthetic": "higgs-like", "samples": 1000, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "search_space": {"optimizer.lr": {"loguniform": [0.01, 0.5]}},
    "tuning": {"trials": 2, "stages": 1},
    "batch_size": 100,
    "catalog": "local",
}


def test_tuner_fit_returns_the_best_trial_with_reported_metrics(tmp_path: Path) -> None:
    tuner = faasml.Tuner(
        from_mapping(JOB),
        param_space={"optimizer.lr": {"uniform": [0.05, 0.3]}},
        tune_config=faasml.TuneConfig(budget=0.05, num_samples=2),
        run_dir=tmp_path / "run",
    )
    results = tuner.fit()
    assert len(results) == 2
    best = results.get_best_result()
    assert 0.05 <= best.config["optimizer.lr"] <= 0.3
    assert best.metrics["val_loss"] == min(r.metrics["val_loss"] for r in results.results)
    assert best.metrics["reported"]["evaluated_samples"] == 200.0
    assert 0 < results.spent_usd <= 0.05
    assert (tmp_path / "run" / "report.md").exists()


def test_report_outside_a_worker_says_where_it_belongs() -> None:
    with pytest.raises(FaasmlError, match="worker"):
        faasml.report(loss=1.0)


def test_tuner_refuses_a_bad_mode() -> None:
    with pytest.raises(ConfigError, match="mode"):
        faasml.Tuner(from_mapping(JOB), tune_config=faasml.TuneConfig(budget=1, mode="up"))
