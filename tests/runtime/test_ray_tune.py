"""`faasml tune --platform ray --address ...` runs the demo jobs, numpy and PyTorch, on a 2-node
local Ray cluster; so does a PyTorch training function through ``faasml.Tuner``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import faasml
from faasml.cli.main import main
from faasml.testing.ray_cluster import local_ray_cluster

from .tiny_jobs import example_train_fn

pytest.importorskip("ray")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head node and a second node, 2 CPUs each; shut down after the module."""
    with local_ray_cluster(nodes=2, cpus_per_node=2) as started:
        yield started


def _tune(job: Path, cluster: Any, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    args = ["tune", str(job), "--budget", "0.05", "--platform", "ray"]
    code = main([*args, "--address", cluster.address, "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished" in out
    assert (run_dir / "report.md").exists()
    return out


def test_tune_runs_the_demo_job_on_the_cluster(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "tune.yaml"
    text = (EXAMPLES / "tune-logreg.yaml").read_text()
    job.write_text(
        text.replace("trials: 16", "trials: 4").replace("samples: 20000", "samples: 4000")
    )
    _tune(job, cluster, tmp_path / "run", capsys)


def test_tune_runs_the_digits_cnn_on_the_cluster(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyTorch under the functions' address-space cap: torch is imported before it."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    job = tmp_path / "digits.yaml"
    text = (EXAMPLES / "tune-digits.yaml").read_text()
    job.write_text(
        text.replace("trials: 8", "trials: 2\n  stages: 2")  # one pruned, one kept
        .replace("samples: 1797", "samples: 400")
        .replace("epochs_per_stage: 2", "epochs_per_stage: 1")
    )
    out = _tune(job, cluster, tmp_path / "run", capsys)
    assert "trials: 1 done, 1 pruned" in out


def test_a_torch_training_function_tunes_on_the_cluster(cluster: Any, tmp_path: Path) -> None:
    """The BatchNorm CNN of examples/tune_function.py, two configurations, one stage."""
    pytest.importorskip("torch")
    results = faasml.Tuner(
        example_train_fn(),
        {"lr": {"loguniform": [0.001, 0.05]}, "width": 4, "weight_decay": 0.0},
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2),
        settings={"batch_size": 32, "tuning.stages": 1, "platform": "ray"},
        run_dir=tmp_path / "run",
    ).fit()
    assert results.record.status == "finished" and len(results) == 2
    assert results.record.platform == "ray"
    assert 0 < results.spent_usd <= 0.05
    # torch is imported outside the address-space cap, so the probe times the function at a
    # small size too (under the cap, torch's own address space filled a small function).
    assert results.record.profile is not None
    assert min(m for m, _ in results.record.profile.compute_points) < 1024
