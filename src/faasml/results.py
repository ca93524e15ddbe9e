"""A tuning run's results as Ray Tune users know them: ``ResultGrid``, ``Result``, each trial's
checkpoint, and ``load_checkpoint`` into the user's own ``torch.nn.Module``.

    grid = tuner.fit()                        # or faasml.ResultGrid.from_path("runs/...")
    best = grid.get_best_result("val_accuracy", "max")
    frame = grid.get_dataframe()              # pandas: pip install 'faasml[pandas]'
    net = faasml.load_checkpoint(best, Net(**best.config))

The grid reads everything from the run's record; checkpoints are read from the run directory's
embedded object store (npz arrays, loaded without unpickling).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from faasml._imports import optional_import
from faasml._validate import shown
from faasml.exceptions import ConfigError, FaasmlError
from faasml.job import MODES, author_names, implied_mode
from faasml.reports.results_report import run_metric, trial_costs
from faasml.runtime.coordinator.ranking import (
    divergence,
    metric_names,
    metric_value,
    pareto_ids,
    rank_key,
)
from faasml.runtime.function.checkpoint import Checkpoint
from faasml.runtime.record.records import RunRecord

_FRAME_METRICS = ("loss", "val_loss", "val_accuracy", "epoch_s")
"""The fields of a trial's last epoch that ``get_dataframe`` shows beside its own metrics."""


@dataclass(frozen=True)
class TrialCheckpoint:
    """A trial's last checkpoint: ``key`` in the run directory's object store (``objects/``)."""

    key: str
    run_dir: Path

    def load(self) -> Checkpoint:
        """Parameters, buffers, optimiser state and position, read as npz (no pickle)."""
        from faasml.runtime.function.checkpoint import load_checkpoint as read
        from faasml.sync.stores import open_store

        folder = (self.run_dir / "objects").resolve()
        if not folder.is_dir():
            raise FaasmlError(f"{self.run_dir} holds no objects/ folder: its checkpoints are gone")
        with open_store(f"embedded://{folder}") as store:
            return read(store, self.key)

    def loop_state(self) -> dict[str, Any] | None:
        """A training loop's last reported checkpoint (``torch.load(weights_only=True)``: no
        arbitrary unpickling); None where the checkpoint is a built-in model's npz."""
        import io
        import zipfile

        from faasml.sync.stores import open_store

        folder = (self.run_dir / "objects").resolve()
        if not folder.is_dir():
            raise FaasmlError(f"{self.run_dir} holds no objects/ folder: its checkpoints are gone")
        with open_store(f"embedded://{folder}") as store:
            data = store.get(self.key)
        if data is None or not zipfile.is_zipfile(io.BytesIO(data)):
            return None
        if not any(n.endswith("data.pkl") for n in zipfile.ZipFile(io.BytesIO(data)).namelist()):
            return None  # np.savez's arrays: a built-in model's checkpoint
        from faasml.loop.context import load_checkpoint_bytes

        return load_checkpoint_bytes(data)

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class Result:
    """One trial's outcome."""

    trial_id: int
    config: dict[str, Any]
    metrics: dict[str, Any]
    """The last epoch's record (loss, val_loss, val_accuracy, epoch_s, reported, ...), and
    each metric the trial reported under its own name (``metrics["val_rmse"]``)."""
    status: str
    checkpoint: TrialCheckpoint | None
    """The trial's last checkpoint (``load_checkpoint``); None where it never trained."""
    history: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    """The run directory."""
    cost_usd: float = 0.0
    """What the trial's functions, invocations and storage were billed."""
    error: str | None = None
    """A failed trial's last failure."""

    @property
    def metrics_history(self) -> list[dict[str, Any]]:
        """Every epoch's record, first to last."""
        return self.history

    @property
    def epochs(self) -> int:
        return len(self.history)

    def metric(self, name: str) -> float | None:
        """The last epoch's value of ``name`` (as ranking reads it); None where it has none."""
        return metric_value(self.metrics, name)

    @property
    def diverged(self) -> bool:
        return self.status == "diverged" or divergence(self.metrics) is not None


@dataclass(frozen=True)
class ResultGrid:
    """Every trial of a tuning run and the run's record: iterate it, index it, rank it."""

    results: list[Result]
    record: RunRecord
    run_dir: Path

    @staticmethod
    def from_record(
        record: RunRecord,
        run_dir: str | os.PathLike[str],
        user_config: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
    ) -> ResultGrid:
        """The grid of a run's record; ``user_config`` names a trial's configuration as the
        caller wrote it (default: a training function's plain names, a job's paths)."""
        folder = Path(run_dir)
        name = user_config or (lambda config: _user_config(record.job, config))
        costs = trial_costs(record)
        results = [
            Result(
                trial_id=t.trial_id,
                config=name(t.config),
                metrics=_flat(t.last),
                status=t.status,
                checkpoint=None if t.checkpoint is None else TrialCheckpoint(t.checkpoint, folder),
                history=[_flat(h) for h in t.history],
                path=folder,
                cost_usd=costs.get(t.trial_id, 0.0),
                error=t.failures[-1] if t.status == "failed" and t.failures else None,
            )
            for t in record.trials
        ]
        return ResultGrid(results, record, folder)

    @staticmethod
    def from_path(run_dir: str | os.PathLike[str]) -> ResultGrid:
        """The grid of the tuning run in ``run_dir`` (finished or not)."""
        from faasml.runtime.record.run_dir import RunDir

        record = RunDir(run_dir).read_record()
        if record.kind != "tune":
            raise ConfigError(
                f"{run_dir} holds a {record.kind} run, but a results grid needs a tune run"
            )
        return ResultGrid.from_record(record, run_dir)

    # ------------------------------------------------------------------ a sequence

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    @overload
    def __getitem__(self, index: int) -> Result: ...

    @overload
    def __getitem__(self, index: slice) -> list[Result]: ...

    def __getitem__(self, index: int | slice) -> Result | list[Result]:
        return self.results[index]

    # ------------------------------------------------------------------ the run

    @property
    def metric(self) -> str:
        """The metric the run ranked by (the job's ``tuning.metric``)."""
        return run_metric(self.record)[0]

    @property
    def mode(self) -> str:
        """'min' or 'max': how the run ranked (the job's ``tuning.mode``, else implied)."""
        return run_metric(self.record)[1]

    @property
    def spent_usd(self) -> float:
        return self.record.bill_usd()

    @property
    def experiment_path(self) -> Path:
        return self.run_dir

    @property
    def errors(self) -> list[str]:
        """The last failure of each failed trial."""
        return [r.error or "failed" for r in self.results if r.status == "failed"]

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        """Trials that trained and did not fail (done, pruned, stopped or diverged)."""
        return sum(1 for r in self.results if r.history and r.status != "failed")

    # ------------------------------------------------------------------ ranking

    def get_best_result(self, metric: str | None = None, mode: str | None = None) -> Result:
        """The best trial by ``metric`` in ``mode`` (default the run's), of those that
        trained and did not fail; a diverged trial is never the best."""
        metric, mode = self._metric_mode(metric, mode)
        ranked = self._ranked(metric, mode)
        if not ranked:
            raise ConfigError(
                f"no trial finished ({self.record.status}); see {self.run_dir / 'report.md'}"
            )
        return ranked[0]

    def pareto(self, metric: str | None = None, mode: str | None = None) -> list[Result]:
        """The trials no other beats on both ``metric`` (by ``mode``, default the run's) and
        dollars billed: cheapest first, each better than every cheaper one."""
        metric, mode = self._metric_mode(metric, mode)
        self._ranked(metric, mode)  # a metric nobody reported is named
        entries = [
            (r.trial_id, r.metric(metric), r.cost_usd)
            for r in self.results
            if r.history and r.status != "failed" and not r.diverged
        ]
        chosen = pareto_ids(entries, mode)
        by_id = {r.trial_id: r for r in self.results}
        return [by_id[i] for i in chosen]

    def _metric_mode(self, metric: str | None, mode: str | None) -> tuple[str, str]:
        if metric is not None and (not isinstance(metric, str) or not metric):
            raise ConfigError(f"the value of metric is {shown(metric)}, but must be a metric name")
        if mode is not None and mode not in MODES:
            raise ConfigError(f"the value of mode is {shown(mode)}, but must be 'min' or 'max'")
        metric = self.metric if metric is None else metric
        if mode is None:
            mode = self.mode if metric == self.metric else implied_mode(metric)
        if mode is None:
            raise ConfigError(
                f"mode is missing: say whether the metric {metric!r} is best low ('min') or "
                "high ('max')"
            )
        return metric, mode

    def _ranked(self, metric: str, mode: str) -> list[Result]:
        """The trials that trained, did not fail and did not diverge, best first; a metric
        no such trial reported is refused in one line naming those reported."""
        trained = [r for r in self.results if r.history and r.status != "failed"]
        finite = [r for r in trained if not r.diverged]
        if finite and all(r.metric(metric) is None for r in finite):
            names = sorted({n for r in trained for n in metric_names(r.metrics)})
            raise ConfigError(
                f"no trial reported the metric {metric!r}; the trials reported: "
                f"{', '.join(names) or 'none'}"
            )
        return sorted(finite, key=lambda r: rank_key(r.metric(metric), mode))

    # ------------------------------------------------------------------ a table

    def get_dataframe(self) -> Any:
        """A pandas DataFrame, one row per trial: trial_id, status, epochs, cost_usd, the
        last epoch's metrics and each ``config/<name>``."""
        pd = optional_import("pandas", "pandas")  # one line naming the extra where missing

        rows = []
        for r in self.results:
            row: dict[str, Any] = {
                "trial_id": r.trial_id,
                "status": r.status,
                "epochs": r.epochs,
                "cost_usd": r.cost_usd,
            }
            row.update({k: r.metrics.get(k) for k in _FRAME_METRICS})
            for where in ("val", "reported"):
                found = r.metrics.get(where)
                if isinstance(found, Mapping):
                    row.update({k: v for k, v in found.items() if k not in row})
            if self.metric not in row:
                row[self.metric] = r.metric(self.metric)
            row.update({f"config/{k}": v for k, v in r.config.items()})
            rows.append(row)
        return pd.DataFrame(rows)


def _flat(epoch: Mapping[str, Any]) -> dict[str, Any]:
    """An epoch's record with what the trial reported beside its own fields, as Ray Tune's
    results hold them: a reported name the record leaves empty (or lacks) takes its value."""
    flat = dict(epoch)
    reported = epoch.get("reported")
    if isinstance(reported, Mapping):
        flat.update({k: v for k, v in reported.items() if flat.get(k) is None})
    return flat


def _user_config(job: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's configuration by the names its author wrote (``author_names``, as
    ``Tuner.user_config``), from the record's job."""
    model = job.get("model")
    if not isinstance(model, Mapping):
        return dict(config)
    constants = model.get("config")
    name = str(model.get("name"))
    return author_names(name, config, constants if isinstance(constants, Mapping) else None)


def load_checkpoint(result: Result | TrialCheckpoint, model: Any = None) -> Any:
    """A trial's final parameters. With ``model`` (a ``torch.nn.Module`` built as the trial
    built it: ``train_fn(result.config, ...)``'s), loads the parameters and buffers into it and
    returns it; without, returns the flat float32 parameter vector (a built-in model's layout,
    for ``Model.evaluate``). Read as npz arrays, never unpickled."""
    if not isinstance(result, Result | TrialCheckpoint):
        raise ConfigError(
            f"load_checkpoint takes a faasml Result, but was given {type(result).__name__}"
        )
    handle = result.checkpoint if isinstance(result, Result) else result
    if handle is None:
        assert isinstance(result, Result)
        raise FaasmlError(
            f"trial {result.trial_id} has no checkpoint ({result.status}: it never trained)"
        )
    state = handle.loop_state()
    if state is not None:  # a training loop's: the dict its last ctx.report carried
        return state
    saved = handle.load()
    if model is None:
        return saved.params.copy()
    return _into_module(model, saved, handle.key)


def _into_module(module: Any, saved: Checkpoint, key: str) -> Any:
    """``saved``'s parameters and buffers copied into ``module`` (the flat layout of
    ``workloads.torch_model``: trainable parameters in ``parameters()`` order, then the
    persistent buffers in ``named_buffers`` order); one line where they do not fit."""
    from faasml.workloads.torch_model import TorchModel, is_torch_module

    if not is_torch_module(module):
        raise ConfigError(
            f"load_checkpoint's model is a {type(module).__name__}, but must be a "
            "torch.nn.Module (or None for the parameter vector)"
        )
    torch = optional_import("torch", "torch")
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    wrapped = TorchModel.from_module(module, input_shape=(1,), num_classes=2)
    sizes = (sum(p.numel() for _, p in params), wrapped.num_buffers)
    if sizes != (saved.params.size, saved.buffers.size):
        shapes = ", ".join(f"{n} {tuple(p.shape)}" for n, p in params[:6])
        more = f" and {len(params) - 6} more" if len(params) > 6 else ""
        raise ConfigError(
            f"the module does not match checkpoint {key}: it has {sizes[0]} parameters "
            f"({shapes}{more}) and {sizes[1]} buffer values, but the checkpoint holds "
            f"{saved.params.size} and {saved.buffers.size}; build it from the trial's config"
        )
    flat: NDArray[np.float32] = np.asarray(saved.params, dtype=np.float32)
    offset = 0
    with torch.no_grad():
        for _, p in params:
            part = flat[offset : offset + p.numel()].reshape(tuple(p.shape))
            p.copy_(torch.from_numpy(np.array(part, copy=True)))
            offset += p.numel()
    if saved.buffers.size:
        wrapped.load_buffers(saved.buffers)
    return module
