"""The dashboard's page and the report's plots show the same series of a record: both take them
from ``reports.run_series``, so the numbers the page's JSON carries are the numbers the plots
draw (once each computed its own, and their planned spend, bill and stage lines differed)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from faasml.dashboard.page import json_text, plain
from faasml.dashboard.view import run_view
from faasml.reports.run_format import run_metric
from faasml.reports.run_series import (
    allocation_series,
    metric_curves,
    planned_spend_series,
    spend_series,
    stage_boundaries,
)
from faasml.runtime.coordinator.meter import Charge
from faasml.runtime.record.codec import record_from_json
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir

RECORDS = Path(__file__).parents[1] / "runtime" / "records"


def _stored(name: str) -> RunRecord:
    return record_from_json(json.loads((RECORDS / f"{name}.json").read_text()))


def _page_and_plots(record: RunRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """The series as the page's JSON carries them, and as the plots draw them."""
    page = json.loads(json_text(run_view(record, "run")))
    shown = {
        "spent": page["spend"]["spent"],
        "planned": page["spend"]["plan"],
        "usage": page["usage"],
        "curves": page["curves"],
        "stage ends": page["stage_epochs"],
    }
    drawn = {
        "spent": spend_series(record),
        "planned": planned_spend_series(record),
        "usage": allocation_series(record),
        "curves": metric_curves(record, run_metric(record)),
        "stage ends": stage_boundaries(record),
    }
    return shown, plain(drawn)


def _tune_with_odd_corners() -> RunRecord:
    """The stored tune with a charge billed before the run's clock, a diverged trial and
    time between its stages (which the stored plan has)."""
    record = _stored("v0-tune")
    assert record.plan is not None and record.plan.between_stages_s
    record.charges.insert(0, Charge(-2.5, "profiling", 0.0001))
    trials = list(record.trials)
    trials[0] = dataclasses.replace(trials[0], status="diverged", diverged_epoch=1)
    return dataclasses.replace(record, trials=trials)


@pytest.mark.parametrize("name", ["v0-tune", "v0-train", "v0-workflow", "v0-before-plan"])
def test_the_page_shows_the_series_the_plots_draw(name: str) -> None:
    shown, drawn = _page_and_plots(_stored(name))
    assert shown == drawn


def test_the_page_and_the_plots_agree_on_a_real_run(finished_run: Path) -> None:
    shown, drawn = _page_and_plots(RunDir(finished_run).read_record())
    assert shown == drawn
    assert shown["usage"]["xs"] and shown["curves"]


def test_both_keep_the_one_rule_for_each_series() -> None:
    """The rules the two once differed on: a charge before the clock counts at 0 s, the plan
    spends nothing between stages, a diverged trial's label names its epoch, a Hyperband
    run has no stage lines."""
    record = _tune_with_odd_corners()
    shown, drawn = _page_and_plots(record)
    assert shown == drawn
    spent = shown["spent"]
    assert spent["xs"][0] == 0.0 and min(spent["xs"]) == 0.0
    assert spent["xs"] == sorted(set(spent["xs"]))  # one point per time
    assert spent["ys"][0][-1] == pytest.approx(record.bill_usd())
    assert record.plan is not None
    between = record.plan.between_stages_s
    first = record.plan.stages[0].predicted
    assert first is not None
    planned_xs, planned_ys = shown["planned"]["xs"], shown["planned"]["ys"][0]
    end = planned_xs.index(pytest.approx(first.time_s))
    assert planned_xs[end + 1] == pytest.approx(first.time_s + between)
    assert planned_ys[end + 1] == planned_ys[end]  # flat between the stages
    assert shown["curves"][0]["label"] == f"trial {record.trials[0].trial_id} (diverged at epoch 1)"
    assert shown["stage ends"] == [record.plan.stages[0].epochs]
    job = {**record.job, "tuning": {**record.job["tuning"], "hyperband": True}}
    shown, drawn = _page_and_plots(dataclasses.replace(record, job=job))
    assert shown == drawn and shown["stage ends"] == []
