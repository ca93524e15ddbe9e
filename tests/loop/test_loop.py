"""The user's own training loop (``faasml.loop``): real training through the planner,
coordinator, worker processes, store and checkpoints on ``local``; results that do not
depend on how many functions a trial gets; faults, errors and refusals."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import faasml
from faasml.runtime.coordinator import CoordinatorOptions, TrialFault
from faasml.runtime.function.worker import Fault
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.sync.stores import open_store
from faasml.types import Allocation
from faasml.workloads.function_model import TrainFunctionError

torch = pytest.importorskip("torch")

from .loops import (  # noqa: E402
    SETTINGS,
    SPACE,
    batchnorm_loop,
    mlp_loop,
    stuck_loop,
    unprepared_loop,
)


def _run(
    folder: Path,
    n: int,
    loop: Any = mlp_loop,
    space: dict[str, Any] | None = None,
    faults: list[TrialFault] | None = None,
    per_segment: int = 1,
    limit_s: float | None = None,
) -> dict[str, Any]:
    """Tune ``loop`` (one trial, three epochs, one epoch per invocation) with its stage forced
    onto ``n`` functions; returns the record. A deadline rather than a budget: a budget caps
    each invocation's time at its predicted cost, which a loaded machine may exceed."""
    tuner = faasml.Tuner(
        loop,
        space or SPACE,
        deadline=3600,
        tune_config=faasml.TuneConfig(num_samples=1, metric="val_rmse", mode="min"),
        settings=SETTINGS,
        run_dir=folder,
    )
    options = CoordinatorOptions(epochs_per_segment=per_segment)
    run = TuneRun(
        tuner.job, tuner.constraint, tuner.run_dir, faults=faults, options=options, measure=False
    )
    run.plan()
    if limit_s is not None:  # the functions' time limit (the platform's maximum duration)
        platform = dataclasses.replace(run.plan_catalog.platform, max_duration_s=limit_s)
        run.plan_catalog = dataclasses.replace(run.plan_catalog, platform=platform)
    assert run.record.plan is not None
    run.record.plan.stages[0].allocation = Allocation(n, 1024, "embedded", "allreduce")
    return record_to_json(run.execute())


def _weights(folder: Path, record: dict[str, Any]) -> dict[str, Any]:
    key = record["trials"][0]["checkpoint"]
    with open_store(f"embedded://{folder / 'objects'}") as store:
        data = store.get(key)
    assert data is not None
    return dict(torch.load(io.BytesIO(data), weights_only=True)["model"])


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("two")
    return folder, _run(folder, 2)


def test_a_loop_trains_and_its_metric_is_the_trials(two: tuple[Path, dict[str, Any]]) -> None:
    _, record = two
    trial = record["trials"][0]
    assert record["status"] == "finished" and trial["status"] == "done"
    history = trial["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3] and {h["n"] for h in history} == {2}
    rmse = [h["reported"]["val_rmse"] for h in history]
    assert rmse[-1] < 0.8 * rmse[0]  # it learns the regression


@pytest.mark.parametrize("n", [1, 3])
def test_the_final_weights_do_not_depend_on_the_function_count(
    n: int, two: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    folder, record = two
    expected = _weights(folder, record)
    got = _weights(tmp_path, _run(tmp_path, n))
    for name, value in expected.items():
        np.testing.assert_allclose(got[name].numpy(), value.numpy(), rtol=1e-4, atol=1e-5)


def test_epochs_in_one_invocation_train_as_separate_invocations_do(
    two: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    folder, record = two
    together = _run(tmp_path, 2, per_segment=2)
    history = together["trials"][0]["history"]
    # The first epoch runs alone (nothing measured on the allocation yet), the next two in one
    # invocation.
    assert [h["invocations"] for h in history] == [1, 1, 0]
    assert [h["reported"] for h in history] == [
        h["reported"] for h in record["trials"][0]["history"]
    ]
    expected, got = _weights(folder, record), _weights(tmp_path, together)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name].numpy(), value.numpy())


def test_a_worker_killed_mid_epoch_resumes_to_the_fault_free_weights(
    two: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    folder, record = two
    # Round 8 is in the second epoch (six rounds of 16 rows an epoch): it restarts from the
    # first epoch's checkpoint, schedule and optimiser state included.
    fault = TrialFault(trial=0, epoch=1, fault=Fault(worker_id=1, round_id=8, during="compute"))
    faulty = _run(tmp_path, 2, faults=[fault])
    assert faulty["trials"][0]["restarts"] == 1 and faulty["trials"][0]["status"] == "done"
    expected, got = _weights(folder, record), _weights(tmp_path, faulty)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name].numpy(), value.numpy())


def test_a_loop_that_raises_fails_its_trial_with_the_traceback(tmp_path: Path) -> None:
    record = _run(tmp_path, 2, space={**SPACE, "fail_at": 1})
    trial = record["trials"][0]
    assert trial["status"] == "failed" and trial["restarts"] == 1  # no retry: it would fail again
    failure = trial["failures"][-1]
    assert "ValueError: boom at epoch 1" in failure and "Traceback" in failure
    assert ", in mlp_loop" in failure  # the loop's own frame


def test_a_loop_that_never_reports_within_the_time_limit_fails_its_trial_saying_so(
    tmp_path: Path,
) -> None:
    record = _run(tmp_path, 1, loop=stuck_loop, limit_s=20)
    trial = record["trials"][0]
    assert trial["status"] == "failed" and trial["restarts"] == 1  # a rerun would time out too
    (failure,) = trial["failures"]
    assert "did not reach ctx.report within the function's time limit of 20 s" in failure
    assert "make an epoch shorter" in failure and "\n" not in failure


def test_a_loop_without_prepare_on_two_functions_is_refused_in_one_line(tmp_path: Path) -> None:
    record = _run(tmp_path, 2, loop=unprepared_loop)
    trial = record["trials"][0]
    assert trial["status"] == "failed"
    assert "without ctx.prepare(model, optimizer)" in trial["failures"][-1]
    assert "\n" not in trial["failures"][-1]


def test_a_checkpoint_weights_only_refuses_gives_one_line(tmp_path: Path) -> None:
    record = _run(tmp_path, 1, space={**SPACE, "bad_checkpoint": True})
    failure = record["trials"][0]["failures"][-1]
    assert record["trials"][0]["status"] == "failed"
    assert "torch.load(weights_only=True) refuses" in failure and "\n" not in failure


def test_batchnorm_buffers_are_averaged_over_the_functions(tmp_path: Path) -> None:
    out = tmp_path / "buffers"
    out.mkdir()
    record = _run(tmp_path / "run", 2, loop=batchnorm_loop, space={**SPACE, "out": str(out)})
    assert record["trials"][0]["status"] == "done"
    for epoch in range(3):
        first = torch.load(out / f"e{epoch}-w0.pt")
        second = torch.load(out / f"e{epoch}-w1.pt")
        for name, value in first.items():  # each function trained on other rows, yet
            np.testing.assert_array_equal(value.numpy(), second[name].numpy())
    assert float(first["1.running_var"].std()) > 0  # statistics of the data, not the initial ones


def test_faasml_resume_continues_a_loop_run_without_the_script(tmp_path: Path) -> None:
    """The record holds the signed, pickled loop: a fresh process resumes the run from it."""
    tuner = faasml.Tuner(
        mlp_loop,
        SPACE,
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2, metric="val_rmse", mode="min"),
        settings={**SETTINGS, "tuning.epochs_per_stage": 1},
        run_dir=tmp_path / "run",
    )
    TuneRun(tuner.job, tuner.constraint, tuner.run_dir).plan()  # planned, then "interrupted"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", "resume", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["status"] == "finished"
    for trial in record["trials"]:
        assert trial["status"] == "done" and trial["epochs_done"] == 1
        assert trial["history"][-1]["reported"]["val_rmse"] > 0


def _returns_none(config: dict[str, Any], ctx: Any) -> None:
    return None


def _no_shard(config: dict[str, Any], ctx: Any) -> None:
    for _ in ctx.epochs():
        ctx.report(val_rmse=1.0)


@pytest.mark.parametrize(
    ("function", "rule"),
    [
        (_returns_none, r"returned None without iterating ctx.epochs\(\)"),
        (_no_shard, r"reached ctx.epochs\(\) without ctx.shard\(data\)"),
    ],
)
def test_what_is_neither_a_loop_nor_a_training_function_is_refused_in_one_line(
    function: Any, rule: str, tmp_path: Path
) -> None:
    with pytest.raises(TrainFunctionError, match=rule) as caught:
        faasml.Tuner(function, SPACE, budget=0.05, run_dir=tmp_path)
    assert "\n" not in str(caught.value)


def test_a_loop_ranks_and_prunes_by_its_own_metric(tmp_path: Path) -> None:
    results = faasml.Tuner(
        mlp_loop,
        {"lr": {"loguniform": [0.001, 0.1]}, "width": 8},
        deadline=3600,
        tune_config=faasml.TuneConfig(num_samples=3, metric="val_rmse", mode="min"),
        settings={"batch_size": 16, "tuning.stages": 2, "tuning.epochs_per_stage": 1, "seed": 2},
        run_dir=tmp_path / "run",
    ).fit()
    first = {r.trial_id: r.history[0]["reported"]["val_rmse"] for r in results.results}
    kept = [r.trial_id for r in results.results if len(r.history) == 2]
    assert len(kept) == 1 and first[kept[0]] == min(first.values())  # pruned by val_rmse
    best = results.get_best_result()
    assert best.trial_id == kept[0] and best.metrics["reported"]["val_rmse"] < first[kept[0]]
    assert best.metrics["val_rmse"] == best.metrics["reported"]["val_rmse"]  # as Ray has it
    assert [h["val_rmse"] for h in best.metrics_history] == [
        h["reported"]["val_rmse"] for h in best.history
    ]
    state = faasml.load_checkpoint(best)  # the dict its last ctx.report carried
    assert set(state) == {"model", "opt", "sched"} and state["sched"]["last_epoch"] == 2
    report = (tmp_path / "run" / "report.md").read_text()  # the names the loop's author wrote
    assert f"`lr={best.config['lr']:.4g}`" in report and "model.config." not in report


def test_the_probe_measures_a_loops_synchronised_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAASML_CACHE", str(tmp_path / "cache"))  # measured, not cached
    tuner = faasml.Tuner(
        mlp_loop,
        SPACE,
        deadline=3600,
        tune_config=faasml.TuneConfig(num_samples=1, metric="val_rmse", mode="min"),
        settings=SETTINGS,
        run_dir=tmp_path / "run",
    )
    run = TuneRun(tuner.job, tuner.constraint, tuner.run_dir)
    run.plan()
    profile = run.record.profile
    assert profile is not None
    assert not [note for note in profile.notes if "synchronised round" in note]
    assert profile.sync_rounds  # two functions' rounds of the loop's vector, timed


def test_a_run_ranking_by_a_metric_no_loop_reports_fails_after_its_first_stage(
    tmp_path: Path,
) -> None:
    """The loop reports val_rmse only: its training loss is not known (None, never 0), and
    ranking by 'loss' would prune at random, so the run stops after stage 1, saying why."""
    tuner = faasml.Tuner(
        mlp_loop,
        {"lr": {"loguniform": [0.001, 0.1]}, "width": 8},
        deadline=3600,
        tune_config=faasml.TuneConfig(num_samples=3),  # ranks by 'loss' (the default)
        settings={"batch_size": 16, "tuning.stages": 2, "tuning.epochs_per_stage": 1, "seed": 2},
        run_dir=tmp_path / "run",
    )
    says = "no trial reported the metric 'loss' the run ranks by (they reported: val_rmse)"
    record = _failed(tuner.fit, tmp_path / "run", says)
    assert record.get("best") is None
    assert "no trial reported the metric 'loss'" in record["stop_reason"]
    histories = [t["history"] for t in record["trials"]]
    assert [len(h) for h in histories] == [1, 1, 1]  # stage 2 never ran
    assert all(h[0]["loss"] is None for h in histories)
    grid = faasml.ResultGrid.from_path(tmp_path / "run")
    assert all(r.metrics["loss"] is None for r in grid)
    with pytest.raises(faasml.ConfigError, match=r"the trials reported: val_rmse$"):
        grid.get_best_result()
    assert not list((tmp_path / "run").glob("curves/*.csv"))  # no curve of unknown losses
    report = (tmp_path / "run" / "report.md").read_text()
    assert "None: no trial reported the metric 'loss'" in report
    assert "NO BEST: no trial reported the metric 'loss'" in report  # the summary's line


def test_training_to_a_target_loss_a_loop_does_not_report_fails_at_its_first_epoch(
    tmp_path: Path,
) -> None:
    trainer = faasml.Trainer(
        mlp_loop,
        {"lr": 0.05, "width": 8},
        deadline=3600,
        max_epochs=20,
        target_loss=0.5,
        settings={"batch_size": 16},
        run_dir=tmp_path / "run",
    )
    says = "epoch 1 reported no 'loss' (it reported: val_rmse), but target_loss is compared with"
    record = _failed(trainer.fit, tmp_path / "run", says)
    assert record.get("target") is None
    assert len(record["trials"][0]["history"]) == 1  # not 20 epochs it could not judge


def test_a_trial_without_the_metric_ranks_last_where_others_have_it(tmp_path: Path) -> None:
    results = faasml.Tuner(
        mlp_loop,
        {"lr": 0.05, "width": 8, "quiet": {"choice": [0, 1]}},  # quiet: reports no val_rmse
        deadline=3600,
        tune_config=faasml.TuneConfig(metric="val_rmse", mode="min", search_alg="grid"),
        settings={"batch_size": 16, "tuning.trials": 2, "tuning.stages": 2, "seed": 2}
        | {"tuning.epochs_per_stage": 1},
        run_dir=tmp_path / "run",
    ).fit()
    quiet = next(r for r in results if r.config["quiet"] == 1)
    loud = next(r for r in results if r.config["quiet"] == 0)
    assert quiet.status == "pruned" and loud.status == "done"
    assert results.get_best_result().trial_id == loud.trial_id
    events = [e.text for e in results.record.events if "reported no" in e.text]
    assert events == [
        f"trial {quiet.trial_id} reported no 'val_rmse' (it reported: rmse_elsewhere); ranked last"
    ]


def _failed(fit: Callable[[], object], folder: Path, says: str) -> dict[str, Any]:
    """Run ``fit``: it raises a ConfigError that starts with ``says``; the run's record, its
    status 'failed'."""
    with pytest.raises(faasml.ConfigError) as caught:
        fit()
    assert str(caught.value).startswith(says)
    record: dict[str, Any] = json.loads((folder / "record.json").read_text())
    assert record["status"] == "failed"
    return record
