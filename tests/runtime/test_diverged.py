"""A diverged trial (a NaN or infinite loss or metric) never wins: it ranks last whatever the
metric's mode, is marked with the epoch it diverged at, trains no further, and shows in the
console, the record and the report; curves and plots are still written. Where every trial
diverges the run has no best: it fails (the API raises)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

import faasml
from faasml.cli.main import main
from faasml.exceptions import DivergedError
from faasml.job import from_mapping
from faasml.runtime.coordinator import CoordinatorOptions, TrialState
from faasml.runtime.coordinator.ranking import divergence, rank_key, ranked
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.record.run_dir import RunDir
from faasml.sim.curves import read_curve
from faasml.types import Allocation
from faasml.workloads.data import images

from .test_faults import _coordinator

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


# ------------------------------------------------------------------ ranking (pure)


def _order(values: list[float | None], mode: str) -> list[float | None]:
    return sorted(values, key=lambda v: rank_key(v, mode))


def test_nan_and_infinities_rank_after_every_finite_value_in_either_mode() -> None:
    values: list[float | None] = [0.5, NAN, 0.2, INF, None, -INF, 0.9]
    for mode, finite in (("min", [0.2, 0.5, 0.9]), ("max", [0.9, 0.5, 0.2])):
        order = _order(values, mode)
        assert order[:3] == finite
        assert order[3] is None  # a missing value before any diverged one
        rest = order[4:]
        assert len(rest) == 3 and all(v is not None and not math.isfinite(v) for v in rest)
    # -inf is no "best loss" and +inf no "best accuracy"
    assert _order([-INF, 3.0], "min") == [3.0, -INF]
    assert _order([INF, 0.1], "max") == [0.1, INF]


def _trial(
    trial_id: int, loss: float, accuracy: float, diverged_epoch: int | None = None
) -> TrialState:
    record = {"epoch": 1, "loss": loss, "val_loss": loss, "val_accuracy": accuracy}
    trial = TrialState(trial_id, {}, history=[record])
    trial.diverged_epoch = diverged_epoch
    return trial


def test_ranked_trials_put_diverged_ones_last_by_loss_and_by_accuracy() -> None:
    trials = [
        _trial(0, NAN, 0.99),  # a NaN model can score a high accuracy: it still ranks last
        _trial(1, 0.7, 0.6),
        _trial(2, 0.4, NAN),  # a NaN accuracy diverged too
        _trial(3, 0.5, 0.8),
        _trial(4, 0.3, 0.9, diverged_epoch=1),  # marked: last whatever its last values
        _trial(5, -INF, 0.7),
    ]
    by_loss = [t.trial_id for t in ranked(trials, "loss")]
    by_accuracy = [t.trial_id for t in ranked(trials, "accuracy")]
    assert by_loss[:2] == [3, 1] and set(by_loss[2:]) == {0, 2, 4, 5}
    assert by_accuracy[:2] == [3, 1] and set(by_accuracy[2:]) == {0, 2, 4, 5}


def test_divergence_names_the_value_that_is_not_finite() -> None:
    assert divergence({"loss": 0.3, "val_loss": 0.2, "val_accuracy": 0.9}) is None
    assert divergence({"loss": NAN, "val_loss": NAN}) == "loss nan"
    assert divergence({"loss": 0.3, "val_loss": INF}) == "validation loss inf"
    assert divergence({"loss": 0.3, "val_accuracy": NAN}) == "validation accuracy nan"
    assert divergence({"loss": 0.3, "val_loss": None}) is None


# ------------------------------------------------------------------ a worker of several epochs


def test_a_segment_of_several_epochs_ends_at_the_epoch_its_trial_diverged(tmp_path: Path) -> None:
    """An lr that overflows float32 makes the parameters NaN in the first epoch: a segment of
    three epochs stops after it, and the coordinator starts no other."""
    options = CoordinatorOptions(sync_timeout_s=10.0, epochs_per_segment=3, stop_diverged=True)
    trial = TrialState(0, {})
    with _coordinator(tmp_path, {"lr": 1e38, "momentum": 0.9}, options=options) as coordinator:
        coordinator.run([trial], Allocation(2, 256, "embedded", "allreduce"), until_epoch=3)
        coordinator.close()
    assert trial.status == "diverged" and trial.diverged_epoch == 1
    assert coordinator.segments == 1 and trial.epochs_done == 1 and len(trial.history) == 1
    assert divergence(trial.history[0]) is not None


# ------------------------------------------------------------------ faasml tune (CLI)

# lr 1e7 sends the MLP's weights to NaN in its first epoch; seed 3 draws it for trials 0
# and 4 and four finite rates for the rest (stage 2 keeps three of six).
MLP_JOB = {
    "name": "diverge-mlp",
    "model": {"name": "mlp", "hidden": [8]},
    "dataset": {"synthetic": "higgs-like", "samples": 600, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "search_space": {"optimizer.lr": {"choice": [0.05, 0.1, 0.2, 0.4, 1.0e7]}},
    "tuning": {"trials": 6, "reduction_factor": 2, "epochs_per_stage": 2, "stages": 2},
    "batch_size": 50,
    "seed": 3,
    "catalog": "local",
}


def test_tune_ranks_diverged_trials_last_and_writes_its_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(MLP_JOB))
    run_dir = tmp_path / "run"
    assert main(["tune", str(job), "--budget", "0.05", "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    record = json.loads((run_dir / "record.json").read_text())
    trials = {t["trial_id"]: t for t in record["trials"]}
    diverged = {i for i, t in trials.items() if t["config"]["optimizer.lr"] > 1}
    assert diverged == {0, 4}
    for i in diverged:
        trial = trials[i]
        # marked, with its epoch, and trained no further: not its stage's second epoch
        assert trial["status"] == "diverged" and trial["diverged_epoch"] == 1
        assert trial["epochs_done"] == 1
        assert f"trial {i} diverged at epoch 1 (loss nan); ranked last" in out
        assert any(e["text"].startswith(f"trial {i} diverged at epoch 1") for e in record["events"])
    # the best is finite, and every trial kept for stage 2 is finite: stage 2 keeps three and
    # four were finite, so the one pruned is the finite trial that ranked worst
    assert record["status"] == "finished"
    best = record["best"]
    assert best["trial"] not in diverged and math.isfinite(best["val_loss"])
    finite = [t for i, t in trials.items() if i not in diverged]
    kept = [t for t in finite if t["epochs_done"] == 4]
    pruned = [t for t in finite if t["status"] == "pruned"]
    assert len(kept) == 3 and len(pruned) == 1
    worst_kept = max(t["history"][1]["val_loss"] for t in kept)
    assert pruned[0]["history"][1]["val_loss"] >= worst_kept
    report = (run_dir / "report.md").read_text()
    assert "| 0 | diverged at epoch 1 (loss nan), ranked last |" in report
    # curves: the finite trials' (a trial that diverged in its first epoch has no finite one)
    for i, trial in trials.items():
        path = run_dir / "curves" / f"trial-{i}.csv"
        assert path.exists() == (i not in diverged)
        if path.exists():
            assert len(read_curve(path)) == trial["epochs_done"]
    assert (run_dir / "plots" / "loss.png").exists()


def _one_trial_job() -> dict[str, Any]:
    """MLP_JOB with its first draw only, lr 1e7: every trial diverges (the job profile the
    test above measured serves: the number of trials does not change what a probe measures)."""
    return {**MLP_JOB, "tuning": {"trials": 1, "epochs_per_stage": 2, "stages": 1}}


def test_tune_where_every_trial_diverges_has_no_best_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_one_trial_job()))
    run_dir = tmp_path / "run"
    assert main(["tune", str(job), "--budget", "0.05", "--run-dir", str(run_dir)]) == 1
    out = capsys.readouterr().out
    assert "trial 0 diverged at epoch 1 (loss nan); ranked last" in out
    assert "NO BEST: every trial diverged" in out and "Best:" not in out
    # a record a resume reads: diverged_epoch checked
    record = record_to_json(RunDir(run_dir).read_record())
    assert record["status"] == "failed" and "best" not in record
    assert record["trials"][0]["status"] == "diverged"
    assert record["trials"][0]["epochs_done"] == 1  # not its stage's second epoch
    assert "NO BEST" in (run_dir / "report.md").read_text()


def test_tuner_raises_where_every_trial_diverges(tmp_path: Path) -> None:
    tuner = faasml.Tuner(
        from_mapping(_one_trial_job()),
        tune_config=faasml.TuneConfig(budget=0.05),
        run_dir=tmp_path / "run",
    )
    with pytest.raises(DivergedError, match="no trial ended with a finite loss"):
        tuner.fit()
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["status"] == "failed" and "best" not in record
    assert [t["status"] for t in record["trials"]] == ["diverged"]
    assert (tmp_path / "run" / "report.md").exists()


# ------------------------------------------------------------------ faasml.Tuner (API)

DATA = images(180, classes=3, size=8, channels=1, seed=1)
TRAIN = (DATA.features[:150], DATA.labels[:150])
TEST = (DATA.features[150:], DATA.labels[150:])
BATCH = 16
"""No partition of the 150 training samples over 1-8 workers is a multiple of it: an epoch's
last round takes a smaller batch (the rest of the partition), which the model counts."""


class Poisoned(torch.nn.Module):
    """A linear classifier whose outputs turn NaN in training epoch ``poison`` (0: never).
    A buffer counts the epochs ended, so every worker and every checkpoint keep the count."""

    def __init__(self, poison: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(64, 3)
        self.poison = poison
        self.register_buffer("ended", torch.zeros(1))

    def forward(self, x: Any) -> Any:
        out = self.linear(x.flatten(1))
        if self.training:
            if self.poison and self.ended.item() >= self.poison - 1:
                out = out * float("nan")
            if x.shape[0] != BATCH:
                self.ended += 1
        return out


def poisoned(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
    return faasml.TorchTrainable(
        model=Poisoned(config["poison"]), train=TRAIN, test=TEST, optimizer="sgd", lr=config["lr"]
    )


SETTINGS = {"batch_size": BATCH, "seed": 2, "tuning.stages": 2, "tuning.epochs_per_stage": 3}


def test_tuner_stops_a_trial_that_diverges_mid_stage_and_keeps_a_finite_best(
    tmp_path: Path,
) -> None:
    tuner = faasml.Tuner(
        poisoned,
        {"lr": {"uniform": [0.05, 0.2]}, "poison": {"choice": [0, 2]}},
        tune_config=faasml.TuneConfig(budget=0.05, num_samples=4),
        settings=SETTINGS,
        run_dir=tmp_path / "run",
    )
    results = tuner.fit()
    by_id = {r.trial_id: r for r in results.results}
    poisoned_ids = {i for i, r in by_id.items() if r.config["poison"] == 2}
    assert poisoned_ids and len(poisoned_ids) < len(by_id)
    record = record_to_json(results.record)
    for trial in record["trials"]:
        if trial["trial_id"] in poisoned_ids:
            # diverged in its stage's second epoch: the third was not run
            assert trial["status"] == "diverged" and trial["diverged_epoch"] == 2
            assert trial["epochs_done"] == 2 and math.isfinite(trial["history"][0]["loss"])
    best = results.get_best_result()
    assert best.config["poison"] == 0 and math.isfinite(best.metrics["val_loss"])
    assert best.status == "done"
    report = (tmp_path / "run" / "report.md").read_text()
    assert "diverged at epoch 2 (loss nan), ranked last" in report
    for trial_id in poisoned_ids:  # its finite first epoch is kept, its divergence noted
        curve = read_curve(tmp_path / "run" / "curves" / f"trial-{trial_id}.csv")
        assert curve.epochs == [1] and curve.metadata["diverged"] == "at epoch 2 (loss nan)"
