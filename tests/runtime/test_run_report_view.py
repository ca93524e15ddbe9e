"""The report and plots show the run's ranking metric and mode, keep the stage table's planned,
re-planned and measured figures apart, round numbers for a reader, and plot series computed
from the record (checked through the functions that compute them, not the pixels)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main
from faasml.reports.run_format import money, number, run_metric, seconds
from faasml.reports.run_report import render_report
from faasml.reports.run_series import (
    allocation_series,
    metric_curves,
    planned_spend_series,
    spend_series,
)
from faasml.runtime.coordinator.meter import Charge
from faasml.runtime.record.codec import record_from_json
from faasml.runtime.record.records import Estimate, RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.types import Allocation

from .tiny_jobs import four_trial_tune_job

RECORDS = Path(__file__).parent / "records"


def _table(report: str, header_start: str) -> list[list[str]]:
    """The cells of the Markdown table whose header row starts with ``header_start``."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return [rows[0], *rows[2:]]  # the header, then the body (no alignment row)


@pytest.fixture(scope="module")
def accuracy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunRecord]:
    """A real tiny tune ranked by validation accuracy (highest first): its folder, record."""
    folder = tmp_path_factory.mktemp("accuracy")
    job = four_trial_tune_job("report-accuracy", 1)
    job["tuning"]["metric"] = "accuracy"
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    code = main(["tune", str(path), "--budget", "0.05", "--run-dir", str(folder / "run")])
    assert code == 0
    return folder / "run", RunDir(folder / "run").read_record()


def test_a_run_ranked_by_accuracy_reports_accuracy(accuracy_run: tuple[Path, RunRecord]) -> None:
    folder, record = accuracy_run
    metric = run_metric(record)
    assert (metric.name, metric.mode) == ("accuracy", "max")
    report = (folder / "report.md").read_text()
    table = _table(report, "| trial |")
    assert table[0][:5] == ["trial", "status", "validation accuracy", "epochs", "bill"]
    by_id = {t.trial_id: t for t in record.trials}
    shown = [(int(row[0]), row[2]) for row in table[1:]]
    assert sorted(i for i, _ in shown) == sorted(by_id)
    for trial_id, cell in shown:  # the last epoch's accuracy, not its loss
        assert cell == number(by_id[trial_id].last["val_accuracy"])
    done = [i for i, _ in shown if by_id[i].status == "done"]
    accuracies = [by_id[i].last["val_accuracy"] for i in done]
    assert accuracies == sorted(accuracies, reverse=True)  # highest first
    assert shown[: len(done)] == [(i, number(by_id[i].last["val_accuracy"])) for i in done]
    best = record.best
    assert best is not None
    assert best.val_accuracy == max(accuracies)
    assert f"validation accuracy **{number(best.val_accuracy)}**" in report
    assert "ranked by accuracy (max)" in report
    assert "$-" not in report and "e-0" not in report.split("## Events")[0]
    plots = folder / "plots"
    assert {p.name for p in plots.glob("*.png")} == {"accuracy.png", "spend.png", "allocation.png"}


def test_the_plotted_series_come_from_the_record(accuracy_run: tuple[Path, RunRecord]) -> None:
    record = accuracy_run[1]
    curves = {c.trial: c for c in metric_curves(record, run_metric(record))}
    for trial in record.trials:
        assert curves[trial.trial_id].values == tuple(h["val_accuracy"] for h in trial.history)
    spent = spend_series(record).ys[0]
    assert spent[-1] == pytest.approx(record.bill_usd())
    assert list(spent) == sorted(spent)
    planned = planned_spend_series(record).ys[0]
    assert planned and record.plan is not None
    predicted = [s.predicted for s in record.plan.stages]
    assert all(p is not None for p in predicted)
    assert planned[0] == pytest.approx(record.usd_of("profiling"))
    assert planned[-1] == pytest.approx(
        record.usd_of("profiling") + sum(p.cost_usd for p in predicted if p is not None)
    )
    # Functions and GB in use: every epoch of every trial counted at once, none left at the end.
    series = allocation_series(record)
    functions, gbs = series.ys
    epochs = [h for t in record.trials for h in t.history]
    assert functions[0] == 0 and functions[-1] == 0
    assert gbs[-1] == pytest.approx(0.0)
    assert max(functions) >= max(h["n"] for h in epochs)
    assert max(functions) <= sum(h["n"] for h in epochs)
    memory = {h["memory_mb"] for h in epochs}
    if len(memory) == 1:  # one size: GB follows the functions
        size = memory.pop() / 1024
        for f, gb in zip(functions, gbs, strict=True):
            assert gb == pytest.approx(f * size)
    # at the middle of each epoch, its functions are in use
    for h in epochs:
        middle = h["t_s"] - h["epoch_s"] / 2
        at = max(i for i, t in enumerate(series.xs) if t <= middle)
        assert functions[at] >= h["n"]


def test_allocation_counts_trials_running_at_once() -> None:
    record = record_from_json(json.loads((RECORDS / "v0-tune.json").read_text()))
    trials = record.trials
    # two trials side by side over [1, 3] s and [2, 4] s, one of 2 × 1024 MB
    first = dict(trials[0].history[0], t_s=3.0, epoch_s=2.0, n=1, memory_mb=2048)
    second = dict(trials[1].history[0], t_s=4.0, epoch_s=2.0, n=2, memory_mb=1024)
    record.trials = [
        dataclasses.replace(trials[0], history=(first,)),
        dataclasses.replace(trials[1], history=(second,)),
    ]
    series = allocation_series(record)
    assert series.xs == (0.0, 1.0, 2.0, 3.0, 4.0)
    assert series.ys == ((0, 1, 3, 2, 0), (0.0, 2.0, 4.0, 2.0, 0.0))


def _replanned_record() -> RunRecord:
    """The tiny tune's record with stage 2 re-planned onto 2 × 1024 MB, ranked by accuracy,
    and a float sum's residue in the bill."""
    record = record_from_json(json.loads((RECORDS / "v0-tune.json").read_text()))
    assert record.plan is not None
    stage = record.plan.stages[1]
    record.plan.stages[1] = dataclasses.replace(
        stage,
        planned_allocation=stage.allocation,
        allocation=Allocation(2, 1024, "embedded", "allreduce"),
        replanned=Estimate(7.25, 0.00012345),
        repredicted=Estimate(7.25, 0.00012345),
        measured=Estimate(8.04, 0.000131),
    )
    record.job["tuning"] = {**record.job["tuning"], "metric": "accuracy"}
    record.charges.append(Charge(1.0, "storage", -1e-19))
    return record


def _cell(estimate: Estimate) -> str:
    return f"{seconds(estimate.time_s)}, {money(estimate.cost_usd)}"


def test_the_stage_table_keeps_planned_replanned_and_measured_apart() -> None:
    record = _replanned_record()
    assert record.plan is not None
    first, second = record.plan.stages
    report = render_report(record, [])
    table = _table(report, "| stage |")
    header, row1, row2 = table
    column = {name: i for i, name in enumerate(header)}
    assert row2[column["planned allocation"]] == "1 × 1792 MB, embedded/allreduce"
    assert (
        row2[column["planned (planner)"]] == f"{seconds(second.time_s)}, {money(second.cost_usd)}"
    )
    assert second.predicted is not None
    assert row2[column["planned (run)"]] == _cell(second.predicted)
    assert row2[column["re-planned allocation"]] == "2 × 1024 MB, embedded/allreduce"
    assert row2[column["re-planned"]] == "7.2 s, $0.0001234"
    assert row2[column["measured"]] == "8.0 s, $0.000131"
    # a stage that kept its plan has nothing under re-planned
    assert row1[column["re-planned allocation"]] == "-" and row1[column["re-planned"]] == "-"
    assert first.measured is not None
    assert (
        row1[column["measured"]]
        == f"{seconds(first.measured.time_s)}, {money(first.measured.cost_usd)}"
    )
    # the Best line and the trial table by accuracy
    assert "validation accuracy" in _table(report, "| trial |")[0]
    assert "ranked by accuracy (max)" in report


@pytest.mark.parametrize(
    ("usd", "text"),
    [
        (-1e-19, "$0"),
        (0.0, "$0"),
        (1234.567, "$1,234.57"),
        (0.000123456, "$0.0001235"),
        (0.5, "$0.5"),
        (-0.25, "-$0.25"),
        (2.5e-7, "$0.00000025"),
    ],
)
def test_money_is_rounded_for_a_reader(usd: float, text: str) -> None:
    assert money(usd) == text


def test_the_bill_never_shows_a_negative_zero() -> None:
    report = render_report(_replanned_record(), [])
    assert "| storage | $0 |" in report
    assert "$-" not in report and "-$0 " not in report


def test_a_reported_metric_ranks_the_report_and_names_its_plot(tmp_path: Path) -> None:
    record = record_from_json(json.loads((RECORDS / "v0-tune.json").read_text()))
    record.job["tuning"] = {**record.job["tuning"], "metric": "val/f1", "mode": "max"}
    scores = {}
    for index, trial in enumerate(record.trials):
        scores[trial.trial_id] = 0.5 + index / 10
        history = tuple(
            {**h, "reported": {"val/f1": scores[trial.trial_id]}} for h in trial.history
        )
        record.trials[index] = dataclasses.replace(trial, history=history)
    report = render_report(record, [])
    table = _table(report, "| trial |")
    assert table[0][2] == "val/f1"
    shown = {int(row[0]): row[2] for row in table[1:]}
    assert shown == {i: number(v) for i, v in scores.items()}
    done = [int(row[0]) for row in table[1:] if row[1] == "done"]
    assert done == sorted(done, key=lambda i: -scores[i])  # highest first (max)
    curves = metric_curves(record, run_metric(record))
    assert {c.trial: c.values[-1] for c in curves} == scores
    from faasml.reports.run_plots import write_plots

    names = {p.name for p in write_plots(record, tmp_path)}
    assert "val_f1.png" in names
