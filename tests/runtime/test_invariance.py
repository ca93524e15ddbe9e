"""Results invariant to the plan: ``batch_size`` is the global batch, so the same job, seed and
budget train every trial to the same curve whether its stages run on 1, 2 or 4 functions — a
built-in model from a job file and a ``TorchTrainable``, through the tuner, the coordinator, real
worker processes and the store."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import faasml
from faasml.catalog import load_catalog
from faasml.job import from_mapping
from faasml.models import allocation_space
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun, job_workload
from faasml.types import Allocation
from faasml.workloads.build import build_model, load_data

from .tiny_jobs import four_trial_tune_job

COUNTS = (1, 2, 4)


def _forced(tuner: faasml.Tuner, n: int) -> dict[str, Any]:
    """The tuner's run with every stage's allocation forced to ``n`` functions (and no
    re-planning that could move it); returns the record."""
    run = TuneRun(tuner.job, tuner.constraint, tuner.run_dir, measure=False)
    run.delta = math.inf
    run.plan()
    assert run.record.plan is not None
    for stage in run.record.plan.stages:
        stage.allocation = Allocation(n, 512, "embedded", "allreduce")
    return record_to_json(run.execute())


def _curves(record: dict[str, Any]) -> dict[int, list[tuple[int, int, float, float]]]:
    """Each trial's (epoch, functions, train loss, validation loss) per epoch."""
    return {
        t["trial_id"]: [(h["epoch"], h["n"], h["loss"], h["val_loss"]) for h in t["history"]]
        for t in record["trials"]
    }


def _same_curves(records: dict[int, dict[str, Any]]) -> None:
    """Every record has the same trials, statuses and curves (to float tolerance) as n = 1's,
    each trained on the n it was forced to."""
    base = records[1]
    for n, record in records.items():
        assert record["status"] == "finished"
        assert [t["status"] for t in record["trials"]] == [t["status"] for t in base["trials"]]
        assert record["best"]["trial"] == base["best"]["trial"]
        for trial, curve in _curves(record).items():
            want = _curves(base)[trial]
            assert [(e, k) for e, k, _, _ in curve] == [(e, n) for e, _, _, _ in want]
            got = np.array([(loss, val) for _, _, loss, val in curve])
            expected = np.array([(loss, val) for _, _, loss, val in want])
            np.testing.assert_allclose(got, expected, rtol=2e-4, atol=1e-6)


def test_a_job_files_builtin_model_trains_the_same_curves_on_1_2_and_4_functions(
    tmp_path: Path,
) -> None:
    job = from_mapping({**four_trial_tune_job("invariance", 2), "batch_size": 64})
    records = {
        n: _forced(faasml.Tuner(job, budget=0.05, run_dir=tmp_path / f"n{n}"), n) for n in COUNTS
    }
    _same_curves(records)
    # Half the trials were stopped after the first stage: the ranking saw the same curves.
    assert [t["status"] for t in records[4]["trials"]].count("pruned") == 2


def mlp(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
    """A small MLP without BatchNorm or dropout: its gradient is a plain mean over rows."""
    import torch

    rng = np.random.default_rng(4)
    features = rng.normal(size=(400, 6)).astype(np.float32)
    labels = (features[:, 0] - features[:, 2] + 0.3 * features[:, 4] > 0).astype(np.int64)
    net = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 2))
    return faasml.TorchTrainable(
        model=net,
        train=(features[:320], labels[:320]),
        test=(features[320:], labels[320:]),
        optimizer="adam",
        lr=config["lr"],
    )


def test_a_torch_trainable_trains_the_same_curves_on_1_2_and_4_functions(
    tmp_path: Path,
) -> None:
    pytest.importorskip("torch")
    settings = {"batch_size": 32, "tuning.stages": 1, "tuning.epochs_per_stage": 3, "seed": 5}
    records = {}
    for n in COUNTS:
        tuner = faasml.Tuner(
            mlp,
            {"lr": {"loguniform": [0.003, 0.05]}},
            budget=0.05,
            tune_config=faasml.TuneConfig(num_samples=2),
            settings=settings,
            run_dir=tmp_path / f"n{n}",
        )
        records[n] = _forced(tuner, n)
    _same_curves(records)


def test_no_trial_is_planned_on_more_functions_than_its_own_global_batch_allows() -> None:
    job = from_mapping(
        {
            **four_trial_tune_job("small-batches", 1),
            "batch_size": 64,
            "search_space": {"batch_size": {"choice": [8, 64]}},
        }
    )
    train, _ = load_data(job.dataset)
    workload = job_workload(job, train, build_model(job.model, train.input_shape, 2))
    assert workload.iterations_per_epoch(np.array([1, 4])).tolist() == [len(train) // 64] * 2
    assert workload.max_functions == 4  # a trial of batch 8: 2 rows per function at most
    space = allocation_space(workload, load_catalog("aws-lambda"), memory_step_mb=1024)
    assert space.n.max() == 4
