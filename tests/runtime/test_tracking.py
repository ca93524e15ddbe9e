"""The trackers export a real tuning run, read back with the real libraries: MLflow's client
over its file store, and TensorBoard's event files through tensorboardX's protocol buffers."""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import pytest

import faasml
from faasml.exceptions import MissingDependencyError
from faasml.job import from_mapping
from faasml.tracking import MLflowCallback, TensorBoardCallback

from .tiny_jobs import tiny_tune_job


def _event_records(folder: Path) -> list[Any]:
    """Every event of the TensorBoard event files in ``folder``, parsed by tensorboardX's
    ``Event`` protocol buffer from the TFRecord framing its ``RecordWriter`` writes (length,
    masked CRC of the length, data, masked CRC of the data: both CRCs checked)."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import masked_crc32c

    events = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        at = 0
        while at < len(data):
            header = data[at : at + 8]
            (length,) = struct.unpack("<Q", header)
            assert struct.unpack("<I", data[at + 8 : at + 12])[0] == masked_crc32c(header)
            body = data[at + 12 : at + 12 + length]
            crc = data[at + 12 + length : at + 16 + length]
            assert struct.unpack("<I", crc)[0] == masked_crc32c(body)
            events.append(Event.FromString(body))
            at += 16 + length
    return events


def _scalars(events: list[Any]) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of the scalar summaries."""
    found: dict[str, list[tuple[int, float]]] = {}
    for event in events:
        for value in event.summary.value:
            if value.HasField("simple_value"):
                found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def _hparams(events: list[Any]) -> dict[str, Any]:
    """The session's hyperparameters as the HParams plugin reads them."""
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    for event in events:
        for value in event.summary.value:
            if value.tag == "_hparams_/session_start_info":
                data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
                start = data.session_start_info.hparams
                return {key: getattr(item, item.WhichOneof("kind")) for key, item in start.items()}
    return {}


def test_mlflow_and_tensorboard_hold_every_trial_of_a_run(tmp_path: Path) -> None:
    store = tmp_path / "mlruns"
    logs = tmp_path / "tb"
    mlflow = MLflowCallback(tracking_uri=f"file:{store}", experiment_name="tiny")
    board = TensorBoardCallback(logs)
    config = faasml.TuneConfig(budget=0.05, callbacks=[mlflow, board])
    job = from_mapping(tiny_tune_job("tracked"))
    grid = faasml.Tuner(job, tune_config=config, run_dir=tmp_path / "run").fit()
    assert grid.record.status == "finished"
    trials = {t.trial_id: t for t in grid.record.trials}

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"file:{store}")
    experiment = client.get_experiment_by_name("tiny")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(int(r.data.tags["faasml.trial"]) for r in runs) == sorted(trials)
    for run in runs:
        trial = trials[int(run.data.tags["faasml.trial"])]
        assert run.info.status == "FINISHED"
        assert run.data.tags["faasml.status"] == trial.status == "done"
        assert float(run.data.params["optimizer.lr"]) == pytest.approx(trial.config["optimizer.lr"])
        history = client.get_metric_history(run.info.run_id, "val_loss")
        assert [(m.step, m.value) for m in history] == [
            (h["epoch"], pytest.approx(h["val_loss"])) for h in trial.history
        ]
        assert run.data.metrics["cost_usd"] > 0

    for trial_id, trial in trials.items():
        events = _event_records(logs / "run" / f"trial-{trial_id}")
        scalars = _scalars(events)
        assert [step for step, _ in scalars["val_loss"]] == [h["epoch"] for h in trial.history]
        for (_, value), epoch in zip(scalars["val_loss"], trial.history, strict=True):
            assert value == pytest.approx(epoch["val_loss"], rel=1e-6)  # stored as float32
        assert scalars["cost_usd"][-1][1] > 0
        hparams = _hparams(events)
        assert hparams["optimizer.lr"] == pytest.approx(trial.config["optimizer.lr"])
        assert hparams["faasml.status"] == "done"


def test_a_tracker_whose_library_is_missing_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'faasml\[mlflow\]'"):
        MLflowCallback(tracking_uri="file:mlruns")
    with pytest.raises(MissingDependencyError, match=r"pip install 'faasml\[tensorboard\]'"):
        TensorBoardCallback("tb")
