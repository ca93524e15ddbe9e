"""Workflows run for real on the local platform: probes are billed as 'search', the search
is re-triggered at each change and only then, and the record and report say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faasml.job import from_mapping
from faasml.reports.run_outputs import write_outputs
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.workflow import WorkflowRun
from faasml.types import Constraint

BASE: dict[str, Any] = {
    "name": "flow",
    "model": {"name": "logistic-regression"},
    "dataset": {"synthetic": "higgs-like", "samples": 2000, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "batch_size": 32,
    "seed": 0,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
}
SEARCH = {"max_probes": 2, "retrigger_probes": 1, "max_functions": 2, "probe_rounds": 2}


def run(folder: Path, workflow: dict[str, Any], epochs: int, **changes: Any) -> dict[str, Any]:
    job = from_mapping(
        {**BASE, **changes, "training": {"max_epochs": epochs}, "workflow": workflow}
    )
    flow = WorkflowRun(job, Constraint(budget_usd=1.0), folder, outputs=write_outputs)
    flow.plan()
    return record_to_json(flow.execute())


@pytest.fixture(scope="module")
def batching(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    folder = tmp_path_factory.mktemp("batching")
    schedule = {"batch_size_schedule": {0: 32, 1: 32, 2: 128}, "search": SEARCH}
    return run(folder, schedule, 3), folder


def test_dynamic_batching_trains_each_phase_with_its_batch_size(
    batching: tuple[dict[str, Any], Path],
) -> None:
    record, _ = batching
    assert record["status"] == "finished"
    history = record["trials"][0]["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert [h["batch_size"] for h in history] == [32, 32, 128]


def test_the_search_is_retriggered_on_a_change_and_not_otherwise(
    batching: tuple[dict[str, Any], Path],
) -> None:
    record, _ = batching
    phases = record["workflow"]["phases"]
    assert [p["searched"] for p in phases] == [True, False, True]
    assert [p["retrigger"] for p in phases] == [False, False, True]
    assert [len(p["probes"]) for p in phases] == [2, 0, 1]
    assert phases[1]["stop_reason"] == "no change"
    # The phase without a change keeps the first phase's choice.
    assert phases[1]["choice"] == phases[0]["choice"]
    history = record["trials"][0]["history"]
    assert (history[2]["n"], history[2]["memory_mb"]) == (
        phases[2]["choice"]["n"],
        phases[2]["choice"]["memory_mb"],
    )


def test_probes_are_real_billed_runs_shown_as_search_cost(
    batching: tuple[dict[str, Any], Path],
) -> None:
    record, folder = batching
    search = [c for c in record["charges"] if c["kind"] == "search"]
    assert search and all(c["usd"] > 0 for c in search)
    probes = [q for p in record["workflow"]["phases"] for q in p["probes"]]
    # A probe measures, or says why it could not (on a loaded machine one may run past what
    # is left of the search budget): never both, never neither.
    measured = [q for q in probes if q["failed"] is None]
    assert measured and all(q["epoch_s"] > 0 for q in measured)
    assert all(isinstance(q["failed"], str) and q["epoch_s"] is None for q in probes if q["failed"])
    assert sum(c["usd"] for c in search) == pytest.approx(sum(q["probe_usd"] for q in probes))
    report = (folder / "report.md").read_text()
    assert "## Deployment search (dynamic-batching)" in report
    assert "batch size 32 -> 128" in report
    assert "| search |" in report  # the bill's line


def test_online_learning_trains_on_the_data_landed_so_far(tmp_path: Path) -> None:
    record = run(
        tmp_path, {"online": {"chunks": [0.5, 0.5], "epochs_per_chunk": 1}, "search": SEARCH}, 2
    )
    assert record["status"] == "finished"
    phases = record["workflow"]["phases"]
    assert [p["samples"] for p in phases] == [800, 1600]
    assert [p["retrigger"] for p in phases] == [False, True]
    assert phases[1]["change"] == "chunk 2 of 2 landed (1,600 samples)"
    assert len(record["trials"][0]["history"]) == 2


def test_nas_trains_each_model_from_scratch_with_its_own_search(tmp_path: Path) -> None:
    models = [{"hidden": [4]}, {"hidden": [16, 16]}]
    record = run(
        tmp_path,
        {"nas": {"models": models, "epochs_per_model": 1}, "search": SEARCH},
        1,
        model={"name": "mlp"},
    )
    assert record["status"] == "finished"
    phases = record["workflow"]["phases"]
    assert [p["model"]["hidden"] for p in phases] == [[4], [16, 16]]
    assert [p["retrigger"] for p in phases] == [False, True]
    assert phases[1]["params"] > phases[0]["params"]
    assert [len(t["history"]) for t in record["trials"]] == [1, 1]
    assert record["best"]["trial"] in (0, 1)


def test_a_nas_model_no_function_can_hold_stops_the_plan_naming_the_phase(
    tmp_path: Path,
) -> None:
    import dataclasses

    from faasml.catalog import load_catalog
    from faasml.exceptions import ConfigError

    local = load_catalog("local")
    small = dataclasses.replace(
        local, platform=dataclasses.replace(local.platform, memory_max_mb=384)
    )
    job = from_mapping(
        {
            **BASE,
            "model": {"name": "mlp"},
            "training": {"max_epochs": 1},
            "workflow": {"nas": {"models": [{"hidden": [8]}, {"hidden": [4096, 4096, 4096]}]}},
        }
    )
    flow = WorkflowRun(job, Constraint(budget_usd=1.0), tmp_path, catalog=small, measure=False)
    with pytest.raises(ConfigError, match=r"workflow phase 2 .*4096.* cannot run: .*too small"):
        flow.plan()


def test_a_full_probe_of_a_phase_with_fewer_rounds_per_epoch_is_not_recorded_short(
    tmp_path: Path,
) -> None:
    """One round per epoch (the whole training set in one global batch), two per probe: the
    search's dollars fit every full probe, so none is recorded as shortened (a resumed search
    weighs a shortened one by its larger noise)."""
    schedule = {"batch_size_schedule": {0: 1600}, "search": SEARCH}
    record = run(tmp_path, schedule, 1)
    probes = [q for p in record["workflow"]["phases"] for q in p["probes"]]
    assert probes and all(q.get("rounds") is None for q in probes), probes
