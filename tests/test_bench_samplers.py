"""benchmarks/bench_samplers.py: a faasml run's bill is set against the run's own prediction
without what measuring the job cost (the plan is made after it), and that cost comes apart."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_samplers.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_samplers", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_samplers", module)
    spec.loader.exec_module(module)
    return module


def test_a_first_run_of_new_data_is_compared_without_measuring_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh profile cache: the run measures the job first, as a seed's first run does.
    monkeypatch.setenv("FAASML_CACHE", str(tmp_path / "cache"))
    module = bench()
    base = {**module.JOB, "dataset": {**module.JOB["dataset"], "samples": 400}}
    base["tuning"] = {"metric": "loss"}
    tuning = {"trials": 2, "reduction_factor": 2, "epochs_per_stage": 1, "stages": 1}
    folder = tmp_path / "run"
    result = module.faasml_run(base, 3, tuning, 0.05, folder)
    value, epochs, usd, predicted = result[:4]
    charges = json.loads((folder / "record.json").read_text())["charges"]
    measuring = sum(c["usd"] for c in charges if c["kind"] == "profiling")
    running = sum(c["usd"] for c in charges if c["kind"] != "profiling")
    assert measuring > 0  # the job was measured in this run, and billed for it
    assert usd == pytest.approx(running)  # the bill the prediction is set against
    assert result[4] == pytest.approx(measuring)  # what measuring cost, apart
    assert predicted > 0 and math.isfinite(value) and epochs == 2
