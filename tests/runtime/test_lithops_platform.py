"""The Lithops platform passes the platform conformance suite on Lithops' localhost back-end."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.job import load_job
from faasml.runtime.platform import Platform, open_platform
from faasml.runtime.session import TuneRun
from faasml.testing.platform_conformance import *  # noqa: F403
from faasml.types import Constraint

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
    state = run.execute()
    assert state["status"] == "finished"
    # Every stage (re-plans included) synchronises no more functions than run at once: more
    # would wait in Lithops' queue while the first ones wait for them.
    limit = min(os.cpu_count() or 1, load_catalog("local").platform.concurrency_limit)
    assert all(stage["allocation"]["n"] <= limit for stage in state["plan"]["stages"])
    assert sum(c["usd"] for c in state["charges"]) > 0
    assert state["best"]["val_loss"] < 0.69  # better than chance on the two classes
