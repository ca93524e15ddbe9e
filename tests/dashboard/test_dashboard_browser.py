"""The dashboard in a real browser (headless Chromium): what a user sees of a finished run, of
a run still running, of a run whose record changes while the page is open, and of a record
holding markup in its configurations and errors; the static page of `faasml report --html`."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from faasml.cli.main import main
from faasml.runtime.coordinator.ranking import metric_value
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.units import format_duration, format_money

from .browser import Node, dump_dom, needs_chromium, screenshot

pytestmark = needs_chromium


def _check_run_page(dom: Node, record: RunRecord) -> None:
    """The page shows the record: its status, every trial with its status and last metric,
    the spend to the cent's millionth, a row per planned stage, and drawn charts."""
    assert dom.by_id("run-status").text() == record.status
    assert dom.by_id("run-name").text() == record.job_name
    rows = dom.by_id("trials").all("tr", data_trial="")
    assert [int(r.attrs["data-trial"]) for r in rows] == [t.trial_id for t in record.trials]
    assert [r.attrs["data-status"] for r in rows] == [t.status for t in record.trials]
    metric = record.job.get("tuning", {}).get("metric", "loss")
    for row, trial in zip(rows, record.trials, strict=True):
        value = metric_value(trial.last, metric)
        shown = row.all("td", class_="num metric")[0].text()
        assert shown == ("-" if value is None else f"{value:.4g}")
    spend = dom.by_id("spend-total")
    assert spend.text() == format_money(record.bill_usd())
    assert float(spend.attrs["data-usd"]) == record.bill_usd()
    assert record.plan is not None
    stages = dom.by_id("stages").all("tr", data_stage="")
    assert len(stages) == len(record.plan.stages)
    for row, stage in zip(stages, record.plan.stages, strict=True):
        measured = row.all("td", class_="num measured")[0].text()
        want = "-" if stage.measured is None else format_duration(stage.measured.time_s)
        assert measured.startswith(want)
    for chart in ("spend-chart", "curves-chart", "usage-chart"):
        assert dom.by_id(chart).all("canvas"), f"{chart} was not drawn"


def test_a_finished_runs_page_shows_its_trials_and_spend(
    finished_run: Path, serve: Any, tmp_path: Path
) -> None:
    record = RunDir(finished_run).read_record()
    served = serve([str(finished_run.parent)])  # the folder's only run opens at once
    dom = dump_dom(served.url)
    _check_run_page(dom, record)
    assert record.best is not None
    best = dom.by_id("trials").all("tr", class_="best")
    assert [int(r.attrs["data-trial"]) for r in best] == [record.best.trial]
    assert "/api/run" in served.requests and "/static/uPlot.iife.min.js" in served.requests
    assert screenshot(served.url, tmp_path / "finished.png") == (1280, 900)


def test_a_running_runs_page_shows_it_running(running_run: Path, serve: Any) -> None:
    served = serve([str(running_run)])
    dom = dump_dom(served.url)
    record = RunDir(running_run).read_record()  # as the page read it: the run is stopped
    assert record.status == "running"
    _check_run_page(dom, record)
    first = dom.by_id("stages").all("tr", data_stage="")[0]
    assert first.attrs["class"] == "running"


def test_the_runs_list_shows_every_run_with_its_status(
    finished_run: Path, running_run: Path, serve: Any
) -> None:
    served = serve([str(finished_run.parent), str(running_run.parent)])
    dom = dump_dom(served.url)
    rows = dom.by_id("runs").all("tr", data_path="")
    assert {r.attrs["data-path"]: r.all("td")[3].text() for r in rows} == {
        str(finished_run): "finished",
        str(running_run): "running",
    }
    links = [a.attrs["href"] for r in rows for a in r.all("a")]
    assert len(links) == 2 and all(link.startswith("?run=") for link in links)


def test_an_open_page_follows_the_record_as_the_run_rewrites_it(
    finished_run: Path, running_run: Path, serve: Any, tmp_path: Path
) -> None:
    """The page shows the running record; while its first answer is on the way the run
    writes its finished record (the record writer's own way); the page's next poll shows it."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(running_run / "record.json", run_dir / "record.json")
    finished = RunDir(finished_run).read_record()
    served = serve([str(run_dir)], lambda: RunDir(run_dir).write_record(finished))
    dom = dump_dom(served.url)
    assert served.requests.count("/api/run") >= 2
    _check_run_page(dom, finished)


def _marked_up(record: RunRecord) -> RunRecord:
    """``record`` with markup in a configuration value, a failure, an event and the job's
    name: each must show as text."""
    trials = list(record.trials)
    trials[0] = dataclasses.replace(
        trials[0], config={"optimizer.lr": '<img id="injected" src="x" onerror="alert(1)">'}
    )
    trials[1] = dataclasses.replace(
        trials[1], failures=('</script><b id="injected-2">function error: boom</b>',)
    )
    events = [*record.events, dataclasses.replace(record.events[0], text="<i id='injected-3'>")]
    job = {**record.job, "name": "<script>document.title='owned'</script>"}
    return dataclasses.replace(record, trials=trials, events=events, job=job)


def _check_escaped(dom: Node) -> None:
    for element in ("injected", "injected-2", "injected-3"):
        assert not dom.all(id=element), f"markup from the record became element {element}"
    config = dom.by_id("trials").all("tr", data_trial="0")[0].all("td", class_="config")[0]
    assert config.text() == 'optimizer.lr=<img id="injected" src="x" onerror="alert(1)">'
    failure = dom.by_id("failures").all("li", data_trial="1")[0]
    assert failure.text() == 'trial 1: </script><b id="injected-2">function error: boom</b>'
    assert dom.by_id("run-name").text() == "<script>document.title='owned'</script>"
    code = [s.text() for s in dom.all("script") if s.attrs.get("type") != "application/json"]
    assert not [text for text in code if "owned" in text]
    assert dom.all("title")[0].text().startswith("<script>document.title='owned'")


def test_markup_in_the_record_shows_as_text_live_and_static(
    finished_run: Path, serve: Any, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    record = _marked_up(RunDir(finished_run).read_record())
    RunDir(run_dir).write_record(record)
    _check_escaped(dump_dom(serve([str(run_dir)]).url))

    assert main(["report", str(run_dir), "--html"]) == 0
    _check_escaped(dump_dom((run_dir / "report.html").as_uri()))


def test_the_static_page_shows_what_the_live_one_does(finished_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    assert main(["report", str(run_dir), "--html"]) == 0
    page = run_dir / "report.html"
    _check_run_page(dump_dom(page.as_uri()), RunDir(run_dir).read_record())


def test_a_run_not_planned_yet_shows_so(finished_run: Path, serve: Any, tmp_path: Path) -> None:
    """A record written before its plan (the first write of a run) shows its trials and no
    stage rows, without a script error."""
    run_dir = tmp_path / "run"
    record = RunDir(finished_run).read_record()
    RunDir(run_dir).write_record(
        dataclasses.replace(record, status="planned", plan=None, charges=[], best=None, stage=0)
    )
    dom = dump_dom(serve([str(run_dir)]).url)
    assert dom.by_id("run-status").text() == "planned"
    assert "Not planned yet." in dom.by_id("plan").text()
    assert dom.by_id("spend-total").text() == format_money(0.0)


def test_a_training_runs_page_shows_its_one_trial(serve: Any, tmp_path: Path) -> None:
    """A training run that missed its target (a stored record of an older version)."""
    stored = Path(__file__).parents[1] / "runtime" / "records" / "v0-train.json"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(stored, run_dir / "record.json")
    record = RunDir(run_dir).read_record()
    dom = dump_dom(serve([str(run_dir)]).url)
    assert record.kind == "train" and record.status == "target-missed"
    _check_run_page(dom, record)
