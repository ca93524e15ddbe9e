"""The results grid of real tuning runs: a sequence, a dataframe, the best by any metric and
mode; the run's metric and mode rank and prune; a reported metric ranks; checkpoints load
into the user's module; the (metric, dollars) Pareto front."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import faasml
from faasml.exceptions import ConfigError, FaasmlError
from faasml.job import from_mapping
from faasml.reports.results_report import pareto_lines
from faasml.results import Result, ResultGrid
from faasml.runtime.coordinator.meter import Charge
from faasml.runtime.record.records import RunRecord, TrialRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.types import Constraint
from faasml.workloads.data import images

JOB = {
    "name": "grid-tune",
    "model": "faasml.testing.models:reporting_logreg",
    "dataset": {"synthetic": "higgs-like", "samples": 600, "test_fraction": 0.25},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "search_space": {"optimizer.lr": {"loguniform": [0.0005, 2.0]}},
    "tuning": {"trials": 4, "stages": 2, "epochs_per_stage": 1},
    "batch_size": 75,
    "catalog": "local",
}


def _tune(folder: Path, mode: str) -> ResultGrid:
    """The job tuned by accuracy in ``mode``: 4 trials, the best 2 kept for a second epoch."""
    config = faasml.TuneConfig(budget=0.05, metric="accuracy", mode=mode)
    return faasml.Tuner(from_mapping(JOB), tune_config=config, run_dir=folder).fit()


@pytest.fixture(scope="module")
def by_mode(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ResultGrid]:
    base = tmp_path_factory.mktemp("modes")
    return {mode: _tune(base / mode, mode) for mode in ("max", "min")}


def _first_epoch(grid: ResultGrid, name: str) -> dict[int, float]:
    return {r.trial_id: r.history[0][name] for r in grid}


def test_the_grid_is_a_sequence_of_results_and_a_dataframe(
    by_mode: dict[str, ResultGrid],
) -> None:
    grid = by_mode["max"]
    assert len(grid) == 4 and [r.trial_id for r in grid] == [0, 1, 2, 3]
    assert grid[0] is grid.results[0] and grid[-1].trial_id == 3
    assert [r.trial_id for r in grid[1:3]] == [1, 2]
    assert grid.metric == "accuracy" and grid.mode == "max"
    assert grid.num_errors == 0 and grid.errors == [] and grid.num_terminated == 4
    for result in grid:
        assert result.metrics_history == result.history and result.epochs == len(result.history)
        assert result.path == grid.run_dir and result.cost_usd > 0
    frame = grid.get_dataframe()
    assert list(frame["trial_id"]) == [0, 1, 2, 3]
    assert sorted(frame["epochs"]) == [1, 1, 2, 2]
    assert {"status", "cost_usd", "val_loss", "val_accuracy", "evaluated_samples"} <= set(
        frame.columns
    )
    assert list(frame["config/optimizer.lr"]) == [r.config["optimizer.lr"] for r in grid]
    assert frame["cost_usd"].sum() <= grid.spent_usd + 1e-12


def test_mode_min_on_accuracy_changes_the_pruning_and_the_winner(
    by_mode: dict[str, ResultGrid],
) -> None:
    high, low = by_mode["max"], by_mode["min"]
    first = _first_epoch(high, "val_accuracy")
    assert first == _first_epoch(low, "val_accuracy")  # the same trials, the same first stage
    order = sorted(first, key=first.__getitem__)
    assert first[order[1]] < first[order[2]], "the test needs trials apart at the cut"
    kept = {mode: {r.trial_id for r in g if r.epochs == 2} for mode, g in by_mode.items()}
    assert kept["max"] == set(order[2:]) and kept["min"] == set(order[:2])
    for mode, grid in by_mode.items():
        assert grid.record.best is not None and grid.record.best.mode == mode
        best = grid.get_best_result()
        assert best.trial_id == grid.record.best.trial
        chosen = max if mode == "max" else min
        assert best.metrics["val_accuracy"] == chosen(r.metrics["val_accuracy"] for r in grid)
        assert grid.record.best.value == best.metrics["val_accuracy"]
    report = (low.run_dir / "report.md").read_text()
    assert "ranked by accuracy" in report and "(min)" in report
    again = RunDir(low.run_dir).read_record()  # mode and value written and read back
    assert again.best == low.record.best


def test_get_best_result_takes_any_metric_and_mode(by_mode: dict[str, ResultGrid]) -> None:
    grid = by_mode["max"]
    losses = {r.trial_id: r.metrics["val_loss"] for r in grid}
    assert grid.get_best_result("val_loss").trial_id == min(losses, key=losses.__getitem__)
    assert grid.get_best_result("loss", "max").trial_id == max(losses, key=losses.__getitem__)
    worst = grid.get_best_result(mode="min")  # the run's metric, the other way
    assert worst.metrics["val_accuracy"] == min(r.metrics["val_accuracy"] for r in grid)
    with pytest.raises(ConfigError, match=r"no trial reported the metric 'f1'; .*accuracy"):
        grid.get_best_result("f1", "max")
    with pytest.raises(ConfigError, match=r"mode is missing: .*'evaluated_samples'"):
        grid.get_best_result("evaluated_samples")
    with pytest.raises(ConfigError, match="the value of mode is 'up'"):
        grid.get_best_result(mode="up")
    reopened = ResultGrid.from_path(grid.run_dir)
    assert [r.config for r in reopened] == [r.config for r in grid]
    assert reopened.get_best_result().trial_id == grid.get_best_result().trial_id


def test_a_metric_no_trial_reports_fails_the_run_with_what_they_reported(tmp_path: Path) -> None:
    config = faasml.TuneConfig(budget=0.05, num_samples=2, stages=1, metric="f1", mode="max")
    with pytest.raises(ConfigError) as caught:
        faasml.Tuner(from_mapping(JOB), tune_config=config, run_dir=tmp_path).fit()
    assert str(caught.value).startswith(
        "no trial reported the metric 'f1' the run ranks by (they reported: accuracy, "
        "evaluated_samples, loss, val_accuracy, val_loss): rank by one of those"
    )
    grid = ResultGrid.from_path(tmp_path)
    assert grid.record.status == "failed" and grid.record.best is None
    assert not [e.text for e in grid.record.events if "ranked last" in e.text]
    with pytest.raises(ConfigError, match="no trial reported the metric 'f1'"):
        grid.get_best_result()


# ---------------------------------------------------------------- a training function

torch = pytest.importorskip("torch")
DATA = images(160, classes=3, size=6, channels=1, seed=3)
TRAIN = (DATA.features[:120], DATA.labels[:120])
TEST = (DATA.features[120:], DATA.labels[120:])


def _net(width: int) -> Any:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, width, 3, padding=1),
        torch.nn.BatchNorm2d(width),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(width, 3),
    )


def norm_cnn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
    """A BatchNorm CNN whose evaluation reports its weights' norm (a metric of its own)."""
    net = _net(config["width"])

    def loss(outputs: Any, labels: Any) -> Any:
        if not net.training:
            with torch.no_grad():
                norm = sum(float((p**2).sum()) for p in net.parameters())
            ctx.report(weight_norm=math.sqrt(norm))
        return torch.nn.functional.cross_entropy(outputs, labels)

    return faasml.TorchTrainable(
        model=net, train=TRAIN, test=TEST, loss=loss, optimizer="sgd", lr=config["lr"]
    )


@pytest.fixture(scope="module")
def by_norm(tmp_path_factory: pytest.TempPathFactory) -> ResultGrid:
    return faasml.Tuner(
        norm_cnn,
        {"lr": {"loguniform": [0.01, 1.0]}, "width": 3},
        tune_config=faasml.TuneConfig(budget=0.05, metric="weight_norm", mode="min"),
        settings={"batch_size": 30, "tuning.trials": 4, "tuning.stages": 2, "seed": 1}
        | {"tuning.epochs_per_stage": 1},
        run_dir=tmp_path_factory.mktemp("norm") / "run",
    ).fit()


def test_a_metric_the_model_reports_ranks_and_prunes(by_norm: ResultGrid) -> None:
    grid = by_norm
    assert grid.record.status == "finished" and grid.metric == "weight_norm"
    first = {r.trial_id: r.history[0]["reported"]["weight_norm"] for r in grid}
    order = sorted(first, key=first.__getitem__)
    assert first[order[1]] < first[order[2]]
    assert {r.trial_id for r in grid if r.status == "done"} == set(order[:2])
    best = grid.get_best_result()
    norms = {r.trial_id: r.metric("weight_norm") for r in grid}
    assert best.trial_id == min(norms, key=lambda i: norms[i] or math.inf)
    assert grid.record.best is not None and grid.record.best.value == norms[best.trial_id]
    assert "weight_norm" in grid.get_dataframe().columns
    reopened = ResultGrid.from_path(grid.run_dir)  # a function's configurations by its names
    assert [r.config for r in reopened] == [r.config for r in grid]
    assert set(grid[0].config) == {"lr", "width"}


def test_load_checkpoint_gives_the_runs_evaluation(by_norm: ResultGrid) -> None:
    best = by_norm.get_best_result()
    net = faasml.load_checkpoint(best, _net(best.config["width"]))
    net.eval()
    with torch.no_grad():
        outputs = net(torch.from_numpy(np.asarray(TEST[0], dtype=np.float32)))
    labels = torch.from_numpy(np.asarray(TEST[1], dtype=np.int64))
    loss = float(torch.nn.functional.cross_entropy(outputs, labels))
    accuracy = int((outputs.argmax(1) == labels).sum()) / len(labels)
    assert loss == pytest.approx(best.metrics["val_loss"], rel=1e-5)
    assert accuracy == pytest.approx(best.metrics["val_accuracy"], abs=1e-9)
    assert float(net[1].num_batches_tracked) > 0  # the buffers came too
    flat = faasml.load_checkpoint(best)  # without a module: the parameter vector
    assert flat.shape == (sum(p.numel() for p in net.parameters()),)
    with pytest.raises(ConfigError, match=r"does not match checkpoint .*: it has \d+ param") as e:
        faasml.load_checkpoint(best, _net(5))
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"must be a torch\.nn\.Module"):
        faasml.load_checkpoint(best, "net")


# ---------------------------------------------------------------- synthetic grids


def _record(trials: list[TrialRecord], costs: dict[int, float], mode: str) -> RunRecord:
    return RunRecord(
        kind="tune",
        job={"tuning": {"metric": "score", "mode": mode}},
        job_source=None,
        constraint=Constraint(1.0, None),
        catalog="local",
        platform="local",
        trials=trials,
        charges=[Charge(0.0, "function", usd, trial) for trial, usd in costs.items()],
    )


def _trial(trial_id: int, score: float | None, status: str = "done") -> TrialRecord:
    epoch = {"epoch": 1, "loss": 0.5, "reported": {} if score is None else {"score": score}}
    return TrialRecord(trial_id, {"x": trial_id}, 1, status=status, history=(epoch,))


def test_pareto_front_of_metric_and_dollars() -> None:
    # (score, dollars): 0 (0.9, 4) best, dearest; 1 (0.7, 1) cheapest; 2 (0.8, 2) between;
    # 3 (0.6, 3) beaten by 1 and 2; 4 no score; 5 diverged; 6 failed.
    scores = {0: 0.9, 1: 0.7, 2: 0.8, 3: 0.6, 4: None, 5: 0.99, 6: 0.95}
    costs = {0: 4.0, 1: 1.0, 2: 2.0, 3: 3.0, 4: 0.5, 5: 0.1, 6: 0.1}
    status = {5: "diverged", 6: "failed"}
    trials = [_trial(i, s, status.get(i, "done")) for i, s in scores.items()]
    grid = ResultGrid.from_record(_record(trials, costs, "max"), ".")
    assert [r.trial_id for r in grid.pareto()] == [1, 2, 0]
    assert [r.trial_id for r in grid.pareto(mode="min")] == [1, 3]
    assert grid.get_best_result().trial_id == 0  # never the diverged nor the failed trial
    assert grid.num_errors == 1
    table = pareto_lines(grid.record)
    assert "## Pareto front: score (max) against dollars" in table
    assert [line.split("|")[1].strip() for line in table if line.startswith("| ")][1:] == [
        "1",
        "2",
        "0",
    ]


def test_a_result_without_a_checkpoint_or_pandas_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    pending = Result(7, {}, {}, "pending", None)
    with pytest.raises(FaasmlError, match="trial 7 has no checkpoint"):
        faasml.load_checkpoint(pending)
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)
    grid = ResultGrid.from_record(_record([_trial(0, 1.0)], {0: 1.0}, "max"), ".")
    with pytest.raises(FaasmlError, match=r"pip install 'faasml\[pandas\]'"):
        grid.get_dataframe()
