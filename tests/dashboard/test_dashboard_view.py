"""What the dashboard computes of a record (pure): the stage columns never mix, trials rank by
the run's own metric and mode, the usage and planned-spend series add up to the record's."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from faasml.dashboard.page import json_text, plain
from faasml.dashboard.view import run_view
from faasml.reports.run_format import seconds
from faasml.runtime.record.codec import record_from_json
from faasml.runtime.record.records import Estimate, RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.types import Allocation
from faasml.units import format_duration, format_money

RECORDS = sorted((Path(__file__).parents[1] / "runtime" / "records").glob("*.json"))


@pytest.fixture()
def record(finished_run: Path) -> RunRecord:
    return RunDir(finished_run).read_record()


def test_a_replanned_stage_keeps_plan_prediction_replan_and_measurement_apart(
    record: RunRecord,
) -> None:
    assert record.plan is not None
    first, second = record.plan.stages
    moved = dataclasses.replace(
        second,
        allocation=Allocation(2, 1024, "embedded", "allreduce"),
        planned_allocation=second.allocation,
        replanned=Estimate(5.0, 0.001),
        repredicted=Estimate(6.0, 0.002),
    )
    plan = dataclasses.replace(record.plan, stages=[first, moved], replans=1)
    row = run_view(dataclasses.replace(record, plan=plan), "run").stages[1]
    assert (row.planned.time_s, row.planned.cost_usd) == (second.time_s, second.cost_usd)
    assert second.predicted is not None and second.measured is not None
    assert row.predicted is not None and row.measured is not None
    assert (row.predicted.time_s, row.predicted.cost_usd) == (
        second.predicted.time_s,
        second.predicted.cost_usd,
    )
    assert row.replanned is not None and row.repredicted is not None
    assert (row.replanned.time, row.replanned.bill) == (format_duration(5.0), format_money(0.001))
    assert (row.repredicted.time, row.repredicted.bill) == ("6.0 s", "$0.002000")
    assert (row.measured.time_s, row.measured.cost_usd) == (
        second.measured.time_s,
        second.measured.cost_usd,
    )
    assert row.allocation == "2 × 1024 MB, embedded/allreduce"
    # The planned allocation is whatever this machine's measured profile made the planner choose.
    planned = second.allocation
    assert row.planned_allocation == (
        f"{planned.n} × {planned.memory_mb} MB, {planned.storage}/{planned.scheme}"
    )


def test_trials_rank_by_the_runs_metric_and_mode_diverged_last(record: RunRecord) -> None:
    trials = list(record.trials)
    last = dict(trials[0].history[-1], val_accuracy=math.nan)
    trials[0] = dataclasses.replace(
        trials[0], history=(*trials[0].history[:-1], last), status="diverged"
    )
    job = {**record.job, "tuning": {**record.job["tuning"], "metric": "accuracy"}}
    view = run_view(dataclasses.replace(record, trials=trials, job=job, best=None), "run")
    assert (view.metric, view.mode, view.metric_name) == ("accuracy", "max", "validation accuracy")
    accuracy = {t.trial_id: t.history[-1]["val_accuracy"] for t in trials[1:]}
    order = sorted(accuracy, key=lambda i: -accuracy[i])
    rows = {row.trial: row for row in view.trials}
    assert [rows[i].rank for i in order] == [1, 2, 3]
    assert rows[0].rank == 4 and rows[0].metric is None and rows[0].metric_text == "nan"
    assert rows[0].status_text.startswith("diverged at epoch")
    assert rows[order[0]].metric_text == f"{accuracy[order[0]]:.4g}"
    assert [c.trial for c in view.curves] == [t.trial_id for t in trials]
    assert view.curves[0].values == tuple(
        h["val_accuracy"] for h in trials[0].history[:-1]
    )  # the diverged epoch is left out


def test_functions_in_use_add_up_to_the_epochs_run(record: RunRecord) -> None:
    usage = run_view(record, "run").usage
    functions = usage.ys[0]
    assert min(functions) == 0 and functions[-1] == 0  # a finished run holds none
    held = sum(
        functions[i] * (usage.xs[i + 1] - usage.xs[i]) for i in range(len(usage.xs) - 1)
    )  # function-seconds: the step line's area
    epochs = sum(h["n"] * h["epoch_s"] for t in record.trials for h in t.history)
    assert held == pytest.approx(epochs, rel=1e-9)
    memory = {h["memory_mb"] for t in record.trials for h in t.history}
    assert len(memory) == 1  # the tiny tune runs every epoch on one size (the profile's)
    size_gb = memory.pop() / 1024
    gb = [x / size_gb for x in usage.ys[1]]
    assert gb == pytest.approx(functions)


def test_the_planned_spend_ends_at_the_runs_prediction(record: RunRecord) -> None:
    assert record.plan is not None and record.plan.predicted is not None
    spend = run_view(record, "run").spend
    profiling = record.usd_of("profiling")
    assert spend.plan.xs[0] == 0 and spend.plan.ys[0][0] == profiling
    assert spend.planned_usd == pytest.approx(profiling + record.plan.predicted.cost_usd)
    assert spend.plan.xs[-1] == pytest.approx(record.plan.predicted.time_s)
    assert spend.spent.ys[0][-1] == spend.total_usd == record.bill_usd()
    assert spend.spent.ys[0] == tuple(sorted(spend.spent.ys[0]))  # a bill only grows


def test_a_running_runs_time_is_the_latest_its_record_holds(running_run: Path) -> None:
    """A run sets its elapsed time as it ends: while it runs, its time so far is the latest
    in its record, not zero (the page once said 'running in 0 ms ... measured (-100%)')."""
    record = RunDir(running_run).read_record()
    assert record.status == "running" and record.elapsed_s == 0
    latest = max(
        [float(h["t_s"]) for t in record.trials for h in t.history]
        + [c.t_s for c in record.charges]
        + [e.t_s for e in record.events]
    )
    view = run_view(record, "run")
    assert latest > 0 and view.elapsed == format_duration(latest)
    assert view.summary[0].startswith(f"running in {seconds(latest)}")  # the summary's rounding
    assert "-100%" not in "\n".join(view.summary)
    # nor the whole plan's time and bill against the time so far, as if it were an error
    against = ("planned ", "predicted ", "measured ")
    assert not [line for line in view.summary if line.startswith(against)]


def test_the_json_holds_no_nan_and_no_markup(record: RunRecord) -> None:
    trials = list(record.trials)
    last = dict(trials[0].history[-1], val_loss=math.inf)
    trials[0] = dataclasses.replace(trials[0], history=(last,), status="diverged")
    job = {**record.job, "name": "</script><script>alert(1)</script>"}
    text = json_text(run_view(dataclasses.replace(record, trials=trials, job=job), "run"))
    assert "<" not in text and ">" not in text
    data = json.loads(text)  # strict JSON: NaN or Infinity would not parse back the same
    assert data["name"] == job["name"]
    assert data["trials"][0]["metric"] is None and data["trials"][0]["metric_text"] == "inf"
    assert plain((1.0, math.nan)) == [1.0, None]


@pytest.mark.parametrize("stored", RECORDS, ids=[p.stem for p in RECORDS])
def test_every_kind_of_stored_record_has_a_view(stored: Path) -> None:
    """Records of older versions, of a training run, a workflow and a run not planned yet."""
    record = record_from_json(json.loads(stored.read_text()))
    data = json.loads(json_text(run_view(record, "run")))
    assert data["status"] == record.status
    assert [t["trial"] for t in data["trials"]] == [t.trial_id for t in record.trials]
    assert len(data["stages"]) == (0 if record.plan is None else len(record.plan.stages))
    assert data["spend"]["total_usd"] == pytest.approx(record.bill_usd())


def test_a_train_runs_progress_counts_to_its_expected_epochs_and_its_cap() -> None:
    """A run to a target loss plans the epochs it expects; it may train past them, up to
    max_epochs: its progress names both rather than 'epoch 9 of 8'."""
    data = json.loads((RECORDS[0].parent / "v0-train.json").read_text())
    data["plan"]["stages"][0]["epochs"] = 2  # expected 2 of at most 3; it trained 3
    assert run_view(record_from_json(data), "run").progress == "epoch 3 (2 expected, at most 3)"
    data["plan"]["stages"][0]["epochs"] = 3  # the plan is the cap: as any run
    assert run_view(record_from_json(data), "run").progress == "epoch 3 of 3"
