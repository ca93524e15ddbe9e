"""Small job files shared by the runtime tests that choose and run a store, and the
training function of examples/tune_function.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def tiny_tune_job(name: str) -> dict[str, Any]:
    """Two logistic-regression trials on 1,200 synthetic samples, one stage: seconds to run."""
    return {
        "name": name,
        "model": "logistic-regression",
        "dataset": {"synthetic": "higgs-like", "samples": 1200, "test_fraction": 0.2},
        "optimizer": {"name": "sgd", "lr": 0.1},
        "search_space": {"optimizer.lr": {"loguniform": [0.01, 0.5]}},
        "tuning": {"trials": 2, "reduction_factor": 2, "epochs_per_stage": 1, "stages": 1},
        "batch_size": 100,
        "seed": 2,
    }


def four_trial_tune_job(name: str, epochs_per_stage: int) -> dict[str, Any]:
    """Four logistic-regression trials on 1,500 synthetic samples, two successive-halving
    stages of ``epochs_per_stage`` epochs: a run long enough to kill and resume."""
    return {
        "name": name,
        "model": "logistic-regression",
        "dataset": {"synthetic": "higgs-like", "samples": 1500, "test_fraction": 0.2},
        "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.5},
        "search_space": {"optimizer.lr": {"loguniform": [0.01, 0.5]}},
        "tuning": {
            "trials": 4,
            "reduction_factor": 2,
            "epochs_per_stage": epochs_per_stage,
            "stages": 2,
        },
        "batch_size": 100,
        "seed": 1,
        "catalog": "local",
    }


def example_train_fn() -> Any:
    """``train_fn`` of examples/tune_function.py."""
    spec = importlib.util.spec_from_file_location("tune_function", EXAMPLES / "tune_function.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tune_function"] = module  # cloudpickle ships an imported module by value
    spec.loader.exec_module(module)
    return module.train_fn
