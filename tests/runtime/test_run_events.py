"""Run callbacks receive typed events in order through the public API; a callback that raises
does not stop the run; ``Tuner.restore`` continues an interrupted run as ``faasml resume``
does, and gives a finished run's results back without training."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import faasml
from faasml.cli.main import main
from faasml.exceptions import ConfigError
from faasml.job import from_mapping
from faasml.runtime.record.run_lock import RunInterrupted

from .tiny_jobs import four_trial_tune_job

JOB = four_trial_tune_job("events", epochs_per_stage=1)


class Recorder(faasml.RunCallback):
    """Keeps every event it is given, in order."""

    def __init__(self) -> None:
        self.events: list[object] = []

    def on_run_start(self, event: faasml.RunStart) -> None:
        self.events.append(event)

    def on_trial_result(self, event: faasml.TrialResult) -> None:
        self.events.append(event)

    def on_stage_end(self, event: faasml.StageEnd) -> None:
        self.events.append(event)

    def on_run_end(self, event: faasml.RunEnd) -> None:
        self.events.append(event)


class Broken(faasml.RunCallback):
    """Raises at every trial result."""

    calls = 0

    def on_trial_result(self, event: faasml.TrialResult) -> None:
        self.calls += 1
        raise ValueError("exporter down\nsecond line")


class StopAtFirstResult(faasml.RunCallback):
    """A Ctrl-C at the first trial result (mid-stage), as a user's would."""

    def on_trial_result(self, event: faasml.TrialResult) -> None:
        raise KeyboardInterrupt


def _tuner(run_dir: Path, *callbacks: faasml.RunCallback) -> faasml.Tuner:
    config = faasml.TuneConfig(budget=0.05, callbacks=list(callbacks))
    return faasml.Tuner(from_mapping(JOB), tune_config=config, run_dir=run_dir)


def test_callbacks_get_typed_events_in_order_and_a_raising_one_does_not_stop_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder, broken = Recorder(), Broken()
    grid = _tuner(tmp_path / "run", broken, recorder).fit(verbose=1)
    record = grid.record
    assert record.status == "finished"
    events = recorder.events
    assert isinstance(events[0], faasml.RunStart) and not events[0].resumed
    assert isinstance(events[-1], faasml.RunEnd) and events[-1].status == "finished"
    results = [e for e in events if isinstance(e, faasml.TrialResult)]
    # One result per epoch the record holds, each with the record's figures.
    assert sorted((r.trial_id, r.epoch) for r in results) == sorted(
        (t.trial_id, h["epoch"]) for t in record.trials for h in t.history
    )
    for result in results:
        epoch = next(t for t in record.trials if t.trial_id == result.trial_id).history[
            result.epoch - 1
        ]
        assert result.metrics["val_loss"] == epoch["val_loss"]
        assert result.metric == "val_loss" and result.value == epoch["val_loss"]
        assert 0 < result.cost_usd <= result.spent_usd
    # Every trial result comes before the end of its stage; stages end in order.
    ends = [i for i, e in enumerate(events) if isinstance(e, faasml.StageEnd)]
    assert [events[i].stage for i in ends] == [1, 2]  # type: ignore[attr-defined]
    for index, event in enumerate(events):
        if isinstance(event, faasml.TrialResult):
            assert index < ends[event.stage - 1]
            assert event.stage == 1 or index > ends[event.stage - 2]
    first = events[ends[0]]
    assert isinstance(first, faasml.StageEnd)
    statuses = {t.trial_id: t.status for t in record.trials}
    assert sorted(first.kept + first.pruned) == [0, 1, 2, 3]
    assert all(statuses[t] == "pruned" for t in first.pruned) and len(first.kept) == 2
    end = events[-1]
    assert isinstance(end, faasml.RunEnd)
    assert end.best is not None and end.best.trial == grid.get_best_result().trial_id
    assert {t.trial_id: t.status for t in end.trials} == statuses
    assert end.spent_usd == pytest.approx(grid.spent_usd)
    # The raising callback was called once, named in one warning line and in the record.
    assert broken.calls == 1
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: callback Broken.on_trial_result raised ValueError: exporter down second "
        "line; the run goes on without it"
    ]
    assert any("callback Broken.on_trial_result raised" in e.text for e in record.events)
    # verbose=1: a line per trial result, a line per stage and the run's end, none over 80.
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("trial ")] == [
        f"trial {r.trial_id}  epoch {r.epoch}  val_loss {r.value:.4g}  {faasml_money(r.cost_usd)}"
        for r in results
    ]
    assert sum(line.startswith("stage ") for line in lines) == 2
    assert lines[-1].startswith("run finished: best trial ")
    assert all(len(line) <= 80 for line in lines)


def faasml_money(usd: float) -> str:
    from faasml.reports.run_format import money

    return money(usd)


def test_fit_prints_nothing_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = four_trial_tune_job("quiet", epochs_per_stage=1)
    job["tuning"] = {"trials": 2, "stages": 1, "epochs_per_stage": 1}
    config = faasml.TuneConfig(budget=0.05)
    faasml.Tuner(from_mapping(job), tune_config=config, run_dir=tmp_path / "run").fit()
    assert capsys.readouterr().out == ""


def test_restore_finishes_an_interrupted_run_as_faasml_resume_does(tmp_path: Path) -> None:
    run_dir, copy = tmp_path / "run", tmp_path / "copy"
    watched = Recorder()
    with pytest.raises(RunInterrupted):
        _tuner(run_dir, StopAtFirstResult(), watched).fit()
    stopped = json.loads((run_dir / "record.json").read_text())
    assert stopped["status"] == "interrupted"
    end = watched.events[-1]  # the run's end is sent however it ends
    assert isinstance(end, faasml.RunEnd)
    assert (end.status, end.reason) == ("interrupted", "Ctrl-C")
    assert any(t["history"] for t in stopped["trials"])
    shutil.copytree(run_dir, copy)

    recorder = Recorder()
    grid = faasml.Tuner.restore(run_dir, callbacks=[recorder]).fit()
    assert grid.record.status == "finished"
    assert main(["resume", str(copy)]) == 0
    resumed = json.loads((copy / "record.json").read_text())
    restored = json.loads((run_dir / "record.json").read_text())
    assert restored["status"] == resumed["status"] == "finished"
    assert restored["best"]["trial"] == resumed["best"]["trial"]
    for got, want in zip(restored["trials"], resumed["trials"], strict=True):
        assert got["status"] == want["status"]
        assert [h["epoch"] for h in got["history"]] == [h["epoch"] for h in want["history"]]
        for a, b in zip(got["history"], want["history"], strict=True):
            assert a["val_loss"] == pytest.approx(b["val_loss"], abs=1e-9)
    # The results are the record's; the restored run's events start after what it had run.
    assert {r.trial_id: r.metrics["val_loss"] for r in grid.results} == {
        t["trial_id"]: t["history"][-1]["val_loss"] for t in restored["trials"]
    }
    start = recorder.events[0]
    assert isinstance(start, faasml.RunStart) and start.resumed
    sent = [(e.trial_id, e.epoch) for e in recorder.events if isinstance(e, faasml.TrialResult)]
    before = {(t["trial_id"], h["epoch"]) for t in stopped["trials"] for h in t["history"]}
    after = {(t["trial_id"], h["epoch"]) for t in restored["trials"] for h in t["history"]}
    assert sorted(sent) == sorted(after - before)

    # A finished run's restore gives its results back, training nothing more.
    again = faasml.Tuner.restore(run_dir, callbacks=[Recorder()]).fit()
    assert json.loads((run_dir / "record.json").read_text()) == restored
    assert again.get_best_result().trial_id == restored["best"]["trial"]
    assert len(again) == 4
    with pytest.raises(ConfigError, match="not a training function"):
        faasml.Tuner.restore(run_dir, trainable=linear_fn)


def linear_fn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
    """A linear classifier of 8x8 images, trained with SGD."""
    return _classifier(config, bias=True)


def other_fn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
    """Not the function a run recorded: another model."""
    return _classifier(config, bias=False)


def _classifier(config: dict[str, Any], bias: bool) -> faasml.TorchTrainable:
    import torch

    from faasml.workloads.data import images

    data = images(160, classes=3, size=8, channels=1, seed=3)
    net = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64 * config["scale"], 3, bias=bias)
    )
    train, test = (data.features[:120], data.labels[:120]), (data.features[120:], data.labels[120:])
    return faasml.TorchTrainable(model=net, train=train, test=test, lr=config["lr"])


def test_restore_of_a_training_function_checks_it_and_gives_configs_by_name(
    tmp_path: Path,
) -> None:
    pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    config = faasml.TuneConfig(budget=0.05, num_samples=2, callbacks=[StopAtFirstResult()])
    space = {"lr": {"loguniform": [0.01, 0.1]}, "scale": 1}
    settings = {"batch_size": 20, "tuning.stages": 1, "tuning.epochs_per_stage": 2}
    tuner = faasml.Tuner(linear_fn, space, tune_config=config, settings=settings, run_dir=run_dir)
    with pytest.raises(RunInterrupted):
        tuner.fit()
    with pytest.raises(ConfigError, match="not the training function the run"):
        faasml.Tuner.restore(run_dir, trainable=other_fn)
    recorder = Recorder()
    grid = faasml.Tuner.restore(run_dir, trainable=linear_fn, callbacks=[recorder]).fit()
    assert grid.record.status == "finished"
    results = [e for e in recorder.events if isinstance(e, faasml.TrialResult)]
    assert results and all(set(r.config) == {"lr", "scale"} for r in results)
    assert all(t.epochs_done == 2 for t in grid.record.trials)
    for result in grid.results:  # by the names the function reads, as fit gives them
        assert set(result.config) == {"lr", "scale"} and result.config["scale"] == 1
        assert 0.01 <= result.config["lr"] <= 0.1


def test_restore_refuses_what_it_cannot_continue(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="callbacks holds 'print'"):
        faasml.TuneConfig(budget=1, callbacks=["print"])  # type: ignore[list-item]
    with pytest.raises(faasml.FaasmlError, match=str(tmp_path / "none")):
        faasml.Tuner.restore(tmp_path / "none")


def test_a_reported_ranking_metric_is_the_result_value_and_lines_stay_within_80() -> None:
    """Pure: the events of trials whose history names a metric the model reported."""
    from faasml.catalog import load_catalog
    from faasml.reports.trial_lines import trial_line
    from faasml.runtime.coordinator.meter import Charge, Meter
    from faasml.runtime.coordinator.trial import TrialState
    from faasml.runtime.runs.events import RunEvents

    name = "a_metric_name_far_longer_than_any_column_allows_" * 2
    epoch = {"epoch": 1, "loss": 0.7, "val_loss": 0.6, "t_s": 1.0, "reported": {name: 12345.678}}
    trials = [TrialState(7, {"lr": 0.1}, history=[epoch], status="diverged")]
    meter = Meter(load_catalog("local"), [Charge(0.5, "function", 0.25, trial=7)])
    sent: list[faasml.TrialResult] = []

    class Keep(faasml.RunCallback):
        def on_trial_result(self, event: faasml.TrialResult) -> None:
            sent.append(event)

    events = RunEvents([Keep()], note=lambda text: None)
    events.start("run", "job", "tune", name, "max", trials)
    assert sent == []  # epochs held before the start are a resumed run's: not sent
    trials[0].history.append({**epoch, "epoch": 2, "t_s": 2.0})
    events.results(trials, meter, stage=1, metric=name, elapsed_s=2.0)
    events.results(trials, meter, stage=1, metric=name, elapsed_s=2.0)  # nothing new
    assert [(r.trial_id, r.epoch, r.metric, r.value) for r in sent] == [(7, 2, name, 12345.678)]
    assert sent[0].cost_usd == 0.25
    line = trial_line(sent[0])
    assert len(line) <= 80
    assert line.startswith("trial 7  epoch 2  a_metric_name_far_longe… 1.235e+04  $0.25  div")
