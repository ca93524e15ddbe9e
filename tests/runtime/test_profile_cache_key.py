"""A measured profile is cached by what the job is, not where it lies: the same training
function run again (another process, another run directory) plans from the cached profile and
pays no profiling; other data or another model is measured anew."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from faasml.runtime.profile.key import data_digest
from faasml.workloads.data import Dataset, write_npz

pytest.importorskip("torch")

SCRIPT = textwrap.dedent(
    """
    import sys

    import torch

    import faasml
    from faasml.runtime.runs.session import TuneRun

    FEATURES = torch.randn(160, 6, generator=torch.Generator().manual_seed(0))
    LABELS = (FEATURES[:, 0] > 0).long()
    WIDTH = int(sys.argv[2])


    def train_fn(config, ctx):
        net = torch.nn.Sequential(
            torch.nn.Linear(6, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, 2)
        )
        return faasml.TorchTrainable(
            model=net, train=(FEATURES, LABELS), optimizer="sgd", lr=config["lr"]
        )


    tuner = faasml.Tuner(
        train_fn,
        {"lr": {"loguniform": [0.01, 0.1]}},
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2),
        settings={"batch_size": 32, "tuning.stages": 1, "tuning.epochs_per_stage": 1},
        run_dir=sys.argv[1],
    )
    TuneRun(tuner.job, tuner.constraint, tuner.run_dir).plan()
    """
)


def _plan(script: Path, run_dir: Path, cache: Path, width: int) -> dict[str, Any]:
    """Plan the script's function job in a fresh process (its own pickle); its record."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "FAASML_CACHE": str(cache)}
    done = subprocess.run(
        [sys.executable, str(script), str(run_dir), str(width)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=script.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record: dict[str, Any] = json.loads((run_dir / "record.json").read_text())
    return record


def _profiling_usd(record: dict[str, Any]) -> float:
    return sum(c["usd"] for c in record["charges"] if c["kind"] == "profiling")


def test_a_training_function_run_again_plans_from_the_cached_profile(tmp_path: Path) -> None:
    script = tmp_path / "tune_fn.py"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"
    first = _plan(script, tmp_path / "run-1", cache, width=8)
    assert first["profile_cached"] is False and _profiling_usd(first) > 0
    again = _plan(script, tmp_path / "run-2", cache, width=8)
    assert again["profile_cached"] is True, "the same function and data were measured again"
    assert _profiling_usd(again) == 0
    assert again["profile"]["key"] == first["profile"]["key"]
    # Another model (the width the function builds) is another profile.
    wider = _plan(script, tmp_path / "run-3", cache, width=64)
    assert wider["profile_cached"] is False
    assert wider["profile"]["key"] != first["profile"]["key"]


def test_an_npz_is_keyed_by_its_arrays_not_its_bytes_or_path(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    data = Dataset.from_arrays(rng.normal(size=(50, 4)).astype(np.float32), rng.integers(0, 2, 50))
    write_npz(tmp_path / "a.npz", data)
    # The same arrays written at another time: an npz's zip entries carry their write time.
    with (
        zipfile.ZipFile(tmp_path / "a.npz") as source,
        zipfile.ZipFile(tmp_path / "b.npz", "w") as copy,
    ):
        for entry in source.infolist():
            copy.writestr(
                zipfile.ZipInfo(entry.filename, (2001, 1, 1, 0, 0, 0)), source.read(entry)
            )
    assert (tmp_path / "a.npz").read_bytes() != (tmp_path / "b.npz").read_bytes()
    assert data_digest(str(tmp_path / "a.npz"), "npz") == data_digest(
        str(tmp_path / "b.npz"), "npz"
    )
    changed = Dataset.from_arrays(data.features * 2, data.labels)
    write_npz(tmp_path / "c.npz", changed)
    assert data_digest(str(tmp_path / "c.npz"), "npz") != data_digest(
        str(tmp_path / "a.npz"), "npz"
    )
    # Other formats: a file's bytes, a directory's files.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.bin").write_bytes(b"1234")
    before = data_digest(str(tmp_path / "d"), "cifar10-bin")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "x.bin").write_bytes(b"1234")
    assert data_digest(str(tmp_path / "e"), "cifar10-bin") == before
    (tmp_path / "e" / "x.bin").write_bytes(b"12345")
    assert data_digest(str(tmp_path / "e"), "cifar10-bin") != before
