"""The Lithops platform passes the platform conformance suite on Lithops' localhost back-end."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import faasml
from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.job import JobSpec, load_job
from faasml.runtime.platforms.contract import FunctionError, Platform, open_platform
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.testing.platform_conformance import *  # noqa: F403
from faasml.types import Constraint

from .tiny_jobs import example_train_fn

pytest.importorskip("lithops")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    monkey = pytest.MonkeyPatch()
    home = tmp_path_factory.mktemp("lithops-home")
    monkey.setenv("HOME", str(home))  # Lithops keeps its localhost storage under ~/.lithops
    config = {
        "lithops": {"backend": "localhost", "storage": "localhost", "data_cleaner": False},
        "localhost": {"runtime": sys.executable},
    }  # no data cleaner: Lithops would leave its cleaner process running after the tests
    opened = open_platform("lithops", load_catalog("local"), config=config)
    yield opened
    opened.close()
    monkey.undo()


def test_cold_then_warm(platform: Platform) -> None:
    """Replaces the suite's test of the same name: Lithops' localhost back-end runs every call
    in a new process, so the second call is as cold as the first (no warm reuse to show)."""
    first = platform.invoke("faasml.testing.functions:pid", None, 256)
    second = platform.invoke("faasml.testing.functions:pid", None, 256)
    assert first.result(timeout=60) != second.result(timeout=60)
    assert first.billed is not None and first.billed.cold
    assert second.billed is not None and second.billed.cold


def test_localhost_runs_as_many_functions_at_once_as_its_worker_processes(
    platform: Platform,
) -> None:
    assert platform.max_concurrency == min(
        os.cpu_count() or 1, platform.catalog.platform.concurrency_limit
    )
    config = {
        "lithops": {"backend": "localhost", "storage": "localhost", "data_cleaner": False},
        "localhost": {"runtime": sys.executable, "worker_processes": 1},
    }
    with open_platform("lithops", load_catalog("local"), config=config) as one:
        assert one.max_concurrency == 1


def test_a_config_without_a_lithops_section_is_refused() -> None:
    with pytest.raises(ConfigError, match="'lithops' section"):
        open_platform("lithops", load_catalog("local"), config={"aws": {}})


def test_tune_runs_the_demo_job_through_lithops(platform: Platform, tmp_path: Path) -> None:
    text = (EXAMPLES / "tune-logreg.yaml").read_text()
    job_file = tmp_path / "tune.yaml"
    job_file.write_text(
        text.replace("trials: 16", "trials: 4")
        .replace("samples: 20000", "samples: 4000")
        .replace("platform: local", "platform: lithops")
    )
    config = {
        "lithops": {"backend": "localhost", "storage": "localhost", "data_cleaner": False},
        "localhost": {"runtime": sys.executable},
    }
    run = TuneRun(
        load_job(job_file),
        Constraint(budget_usd=0.05),
        tmp_path / "run",
        platform_options={"config": config},
    )
    run.plan()
    state = record_to_json(run.execute())
    assert state["status"] == "finished"
    # Every stage (re-plans included) synchronises no more functions than run at once: more
    # would wait in Lithops' queue while the first ones wait for them.
    limit = min(os.cpu_count() or 1, load_catalog("local").platform.concurrency_limit)
    assert all(stage["allocation"]["n"] <= limit for stage in state["plan"]["stages"])
    assert sum(c["usd"] for c in state["charges"]) > 0
    assert state["best"]["val_loss"] < 0.69  # better than chance on the two classes


def test_a_torch_allocation_past_the_memory_size_is_out_of_memory(platform: Platform) -> None:
    """torch's allocator fails with RuntimeError, not MemoryError: still an out-of-memory."""
    pytest.importorskip("torch")
    invocation = platform.invoke("faasml.testing.functions:allocate_tensor", 8 * 1024, 1024)
    with pytest.raises(FunctionError) as caught:
        invocation.result(timeout=120)
    assert caught.value.kind == "out-of-memory", caught.value
    assert "can't allocate memory" in str(caught.value)


def _run_on_lithops(job: JobSpec, run_dir: Path) -> dict[str, Any]:
    config = {
        "lithops": {"backend": "localhost", "storage": "localhost", "data_cleaner": False},
        "localhost": {"runtime": sys.executable},
    }
    run = TuneRun(job, Constraint(budget_usd=0.05), run_dir, platform_options={"config": config})
    run.plan()
    state = record_to_json(run.execute())
    assert state["status"] == "finished", state["events"][-3:]
    assert 0 < sum(c["usd"] for c in state["charges"]) <= 0.05
    return state


def test_tune_runs_the_digits_cnn_through_lithops(platform: Platform, tmp_path: Path) -> None:
    """PyTorch under the functions' address-space cap: torch is imported before it."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    text = (EXAMPLES / "tune-digits.yaml").read_text()
    job_file = tmp_path / "digits.yaml"
    job_file.write_text(
        text.replace("trials: 8", "trials: 2\n  stages: 2")  # one pruned, one kept
        .replace("samples: 1797", "samples: 400")
        .replace("epochs_per_stage: 2", "epochs_per_stage: 1")
        .replace("platform: local", "platform: lithops")
    )
    state = _run_on_lithops(load_job(job_file), tmp_path / "run")
    assert sorted(t["status"] for t in state["trials"]) == ["done", "pruned"]


def test_a_torch_training_function_tunes_through_lithops(
    platform: Platform, tmp_path: Path
) -> None:
    """The BatchNorm CNN of examples/tune_function.py, two configurations, one stage."""
    pytest.importorskip("torch")
    tuner = faasml.Tuner(
        example_train_fn(),
        {"lr": {"loguniform": [0.001, 0.05]}, "width": 4, "weight_decay": 0.0},
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2),
        settings={"batch_size": 32, "tuning.stages": 1, "platform": "lithops"},
        run_dir=tmp_path / "run",
    )
    # The Tuner's job, run with the module's Lithops settings (no data cleaner left running).
    state = _run_on_lithops(tuner.job, tmp_path / "run")
    assert [t["status"] for t in state["trials"]] == ["done", "done"]
    # torch is imported outside the address-space cap, so the probe times the function at a
    # small size too (under the cap, torch's own address space filled a small function).
    assert min(m for m, _ in state["profile"]["compute_points"]) < 1024
