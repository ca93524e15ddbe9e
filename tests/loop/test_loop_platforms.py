"""A training loop tunes through ``faasml.Tuner`` on Ray (a 2-node local cluster) and on
Lithops (its localhost back-end), as a training function does: probed, planned, run, billed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import faasml
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.types import Constraint

pytest.importorskip("torch")

from .loops import mlp_loop

SPACE = {"lr": {"loguniform": [0.05, 0.1]}, "width": {"choice": [4, 8]}}


def _tuner(platform: str, run_dir: Path) -> faasml.Tuner:
    return faasml.Tuner(
        mlp_loop,
        SPACE,
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2, metric="val_rmse", mode="min"),
        settings={"batch_size": 16, "tuning.stages": 1, "platform": platform},
        run_dir=run_dir,
    )


def _check(state: dict[str, Any]) -> None:
    assert state["status"] == "finished", state["events"][-3:]
    for trial in state["trials"]:
        assert trial["status"] == "done"
        assert all("val_rmse" in h["reported"] for h in trial["history"])
    assert 0 < sum(c["usd"] for c in state["charges"]) <= 0.05


def test_a_loop_tunes_on_a_ray_cluster(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from faasml.testing.ray_cluster import local_ray_cluster

    with local_ray_cluster(nodes=2, cpus_per_node=2):
        results = _tuner("ray", tmp_path / "run").fit()
    assert results.record.platform == "ray"
    _check(record_to_json(results.record))


def test_a_loop_tunes_through_lithops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("lithops")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # Lithops' localhost storage
    tuner = _tuner("lithops", tmp_path / "run")
    config = {
        "lithops": {"backend": "localhost", "storage": "localhost", "data_cleaner": False},
        "localhost": {"runtime": sys.executable},
    }  # no data cleaner: Lithops would leave its cleaner process running after the tests
    run = TuneRun(
        tuner.job, Constraint(budget_usd=0.05), tuner.run_dir, platform_options={"config": config}
    )
    run.plan()
    _check(record_to_json(run.execute()))
