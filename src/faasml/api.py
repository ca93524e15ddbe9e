"""The Python API, in the shape Ray Tune and Optuna users know: a job file or any PyTorch
training function.

    import faasml

    tuner = faasml.Tuner(
        "examples/tune-logreg.yaml",
        param_space={"optimizer.lr": {"loguniform": [0.001, 1.0]}},
        tune_config=faasml.TuneConfig(budget=0.05, num_samples=8),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print(best.config, best.metrics["val_loss"])

    def train_fn(config, ctx):
        return faasml.TorchTrainable(
            model=Net(config["width"]), train=(X, y), test=(Xt, yt), optimizer="adam",
            lr=config["lr"],
        )

    tuner = faasml.Tuner(train_fn, {"lr": {"loguniform": [1e-3, 1e-1]}, "width": 16}, budget=0.05)
    results = tuner.fit()

``Tuner.fit`` plans the successive-halving stages within the budget or deadline, runs every
trial for real on the job's platform and returns the results; the run directory holds the
record, the report and the plots. A trial whose loss turns NaN or infinite is marked
'diverged' and ranked last; where every trial diverges, ``fit`` raises ``DivergedError``.
Where trials failed after repeated restarts, ``fit`` raises ``TrialsLostError``, whose
``results`` is the ``ResultGrid`` it would have returned.
``faasml.report(...)`` (``ctx.report`` in a training function) records extra metrics from model
code. A training function becomes a job whose model is the function
(``faasml.workloads.function_model``), so it runs through the same planner, coordinator,
workers, checkpoints and billing as a job file.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faasml._validate import shown
from faasml.api_checks import (
    check_type,
    checked_callbacks,
    search_alg,
    tuning_overrides,
    with_lines,
)
from faasml.api_function import function_job
from faasml.exceptions import ConfigError, DivergedError, TrialsLostError
from faasml.job import JobSpec, from_mapping
from faasml.job.layers import set_path
from faasml.results import Result, ResultGrid, load_checkpoint
from faasml.runtime.runs.events import RunCallback
from faasml.types import Constraint, Objective
from faasml.workloads.context import report
from faasml.workloads.function_model import TorchTrainable


@dataclass(frozen=True)
class TuneConfig:
    """What to tune within: a budget (US dollars), a deadline (seconds) or both, and the SHA
    shape (``num_samples`` trials, keep 1/``reduction_factor`` per stage); stages and epochs
    not given take the one default rule of ``faasml.models.shape``, as a job file does."""

    budget: float | None = None
    deadline: float | None = None
    num_samples: int | None = None
    reduction_factor: int | None = None
    epochs_per_stage: int | None = None
    stages: int | None = None
    metric: str | None = None
    mode: str | None = None
    """'min' or 'max' (Ray Tune's spelling): how ``metric`` ranks and prunes the trials;
    implied for a loss ('min') or an accuracy ('max'), required for any other metric."""
    minimise: str | None = None
    """With both bounds: 'time' (default) or 'cost'."""
    search_alg: Any = None
    """How trials are drawn: 'random' (default), 'grid', 'tpe', 'gp' (``faasml.samplers``),
    or an ``optuna.samplers.BaseSampler`` object."""
    callbacks: Sequence[RunCallback] = ()
    """``faasml.RunCallback`` objects the run calls with its typed events (``runtime.events``):
    trial results, stage ends, the run's end; e.g. ``faasml.tracking.MLflowCallback``."""
    hyperband: int | None = None
    """Hyperband's brackets for a largest budget of this many epochs in place of successive
    halving (a job file's ``tuning.hyperband``): no ``num_samples``, stages or epochs then."""

    def __post_init__(self) -> None:
        """Each field of the right type (a number, a whole number, a string or None), so a
        wrong one is named here rather than failing deep inside planning."""
        for name in ("budget", "deadline"):
            check_type(name, getattr(self, name), (numbers.Real,), "a number")
        for name in ("num_samples", "reduction_factor", "epochs_per_stage", "hyperband"):
            check_type(name, getattr(self, name), (numbers.Integral,), "a whole number")
        for name in ("metric", "mode", "minimise"):
            check_type(name, getattr(self, name), (str,), "a string")
        object.__setattr__(self, "callbacks", checked_callbacks(self.callbacks))

    def constraint(self) -> Constraint:
        objective = None
        if self.minimise is not None:
            if self.minimise not in ("time", "cost"):
                raise ConfigError(
                    f"the value of minimise is {self.minimise!r}, but must be 'time' or 'cost'"
                )
            objective = Objective.MIN_TIME if self.minimise == "time" else Objective.MIN_COST
        return Constraint(self.budget, self.deadline, objective)


class Tuner:
    """Tunes a job (a job file, a ``JobSpec``, a training function ``train_fn(config, ctx)``
    returning ``TorchTrainable``, or a training loop ``train_loop(config, ctx)`` that iterates
    ``ctx.epochs()``: ``faasml.loop``) within a budget or a deadline.

    ``param_space`` maps names to distributions (``{"loguniform": [low, high]}``, ``uniform``,
    ``int``, ``choice``); for a job, names are job paths (``optimizer.lr``); for a function,
    plain names the function reads from ``config``, where any other value is a constant
    passed as is, and ``batch_size`` is faasml's global batch size (not in ``config``; a loop's
    ``config`` has it where the space has it).
    ``budget`` and ``deadline`` are shortcuts for ``TuneConfig``'s. ``settings`` sets job
    fields by dotted path (docs/jobs.md), e.g. ``{"batch_size": 32, "tuning.stages": 2}``.
    """

    def __init__(
        self,
        job: str | os.PathLike[str] | JobSpec | Callable[..., Any],
        param_space: Mapping[str, Any] | None = None,
        *,
        tune_config: TuneConfig | None = None,
        budget: float | None = None,
        deadline: float | None = None,
        settings: Mapping[str, Any] | None = None,
        run_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        _check_arguments(job, param_space, tune_config, settings, run_dir)
        config = _merge_bounds(tune_config or TuneConfig(), budget, deadline)
        if config.mode is not None and config.mode not in ("min", "max"):
            raise ConfigError(f"the value of mode is {config.mode!r}, but must be 'min' or 'max'")
        tuning = tuning_overrides(config, settings or {})
        self._search_alg = search_alg(config.search_alg)
        self._keys: dict[str, str] = {}
        self._constants: dict[str, Any] = {}
        self._default_dir: Path | None = None
        self._checked = False
        """The run directory was checked fit for a new run (before a function's data)."""
        self._restored = False
        """Made by ``restore``: ``fit`` continues the run in ``run_dir``."""
        self.callbacks = config.callbacks
        self.constraint = config.constraint()
        if callable(job) and not isinstance(job, JobSpec):
            self.job, space = function_job(
                job,
                param_space or {},
                tuning,
                dict(settings or {}),
                lambda name: self._function_folder(run_dir, name),
            )
            self._keys, self._constants = space.keys, space.constants
        else:
            overrides: dict[str, Any] = {**dict(settings or {}), **tuning}
            if param_space is not None:
                overrides["search_space"] = dict(param_space)
            if isinstance(job, JobSpec):
                data = job.to_dict(redact=False)
                for key, value in overrides.items():
                    set_path(data, key, value)
                self.job = from_mapping(data, source=job.source)
            else:
                from faasml.runtime.runs.loop_job import loop_job, names_loop, read_job

                self.job = read_job(Path(job), overrides)
                if names_loop(self.job):  # a training loop's job file: its stand-in data
                    folder = self._function_folder(run_dir, self.job.name)
                    self.job = loop_job(self.job, folder)
        self.job.require_tuning()
        self.run_dir = Path(run_dir) if run_dir is not None else self._run_dir(self.job.name)

    def _function_folder(self, run_dir: str | os.PathLike[str] | None, name: str) -> Path:
        """The run's ``function`` folder, for the job's data (checked new: never over a run)."""
        from faasml.runtime.record.run_dir import RunDir

        folder = (Path(run_dir) if run_dir is not None else self._run_dir(name)) / "function"
        RunDir(folder.parent).check_new()  # before its data goes in: never over a run
        self._checked = True
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _run_dir(self, name: str) -> Path:
        """runs/<name>-<time>, chosen once."""
        if self._default_dir is None:
            self._default_dir = Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        return self._default_dir

    def user_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A trial's configuration as the caller wrote its keys (a function's plain names)."""
        if not self._keys:
            return dict(config)
        return {**self._constants, **{self._keys.get(k, k): v for k, v in config.items()}}

    @classmethod
    def restore(
        cls,
        run_dir: str | os.PathLike[str],
        trainable: Callable[..., Any] | None = None,
        *,
        callbacks: Sequence[RunCallback] = (),
    ) -> Tuner:
        """The tuner of the run in ``run_dir``: its ``fit()`` continues the run as ``faasml
        resume`` does (the job it recorded, under the same guard) and returns its results; a
        finished run's results come back without training. ``trainable``, where given, must
        be the training function the run recorded (checked by what it builds)."""
        from faasml.api_restore import restored_tuner

        return restored_tuner(cls, run_dir, trainable, checked_callbacks(callbacks))

    def fit(self, verbose: int = 0) -> ResultGrid:
        """Plan, run every stage for real and return the results. ``verbose=1`` prints a line
        per trial result (as piped ``faasml tune`` does); 0, the default, prints nothing."""
        from faasml.reports.run_outputs import write_outputs
        from faasml.runtime.record.run_dir import RunDir
        from faasml.runtime.record.run_lock import lock_run
        from faasml.runtime.runs.session import TuneRun

        callbacks = with_lines(self.callbacks, verbose)
        if self._restored:
            from faasml.api_restore import continue_run

            record = continue_run(self.run_dir, callbacks)
        else:
            if not self._checked:
                RunDir(self.run_dir).check_new()  # never over a run that is there
            with lock_run(self.run_dir):  # one run at a time in the folder
                if RunDir(self.run_dir).record_path.exists():
                    RunDir(self.run_dir).check_new()  # a run began in it since: refused
                run = TuneRun(
                    self.job,
                    self.constraint,
                    self.run_dir,
                    outputs=write_outputs,
                    callbacks=callbacks,
                )
                run.search_alg = self._search_alg
                run.plan()
                record = run.execute()
        if record.best is None and any(t.status == "diverged" for t in record.trials):
            raise DivergedError(
                "no trial ended with a finite loss: every trial that trained diverged (a NaN or "
                f"infinite loss); narrow the search space; see {self.run_dir / 'report.md'}"
            )
        if record.status == "failed" and record.best is None and record.stop_reason:
            raise ConfigError(f"{record.stop_reason}; see {self.run_dir / 'report.md'}")
        grid = ResultGrid.from_record(record, self.run_dir, self.user_config)
        _raise_lost(grid)
        return grid


def _raise_lost(grid: ResultGrid) -> None:
    """Raise ``TrialsLostError`` (carrying ``grid``) when the run lost trials: a search that
    lost some ranked only the rest, which a caller must not take for the whole search."""
    from faasml.reports.run_summary import lost_line

    line = lost_line(grid.record)
    if line is not None:
        raise TrialsLostError(
            f"{line}; the results are in the error's .results and {grid.run_dir / 'report.md'}",
            results=grid,
        )


def _check_arguments(
    job: object, param_space: object, tune_config: object, settings: object, run_dir: object
) -> None:
    """Tuner's arguments of the right kinds, each named with the rule when not."""
    if not (callable(job) or isinstance(job, str | os.PathLike | JobSpec)):
        raise ConfigError(
            f"the job is {shown(job)} ({type(job).__name__}), but must be a job file's path, a "
            "JobSpec or a training function"
        )
    for name, value in (("param_space", param_space), ("settings", settings)):
        if value is not None and not isinstance(value, Mapping):
            raise ConfigError(
                f"the value of {name} is {shown(value)} ({type(value).__name__}), but must be a "
                "mapping (a dict) of names to values"
            )
    if tune_config is not None and not isinstance(tune_config, TuneConfig):
        raise ConfigError(
            f"the value of tune_config is {shown(tune_config)}, but must be a faasml.TuneConfig"
        )
    if run_dir is not None and not isinstance(run_dir, str | os.PathLike):
        raise ConfigError(f"the value of run_dir is {shown(run_dir)}, but must be a path")


def _merge_bounds(config: TuneConfig, budget: float | None, deadline: float | None) -> TuneConfig:
    for name, value in (("budget", budget), ("deadline", deadline)):
        if value is not None and getattr(config, name) is not None:
            raise ConfigError(f"{name} is given twice: as {name}= and in tune_config; give one")
    return dataclasses.replace(
        config,
        budget=config.budget if budget is None else budget,
        deadline=config.deadline if deadline is None else deadline,
    )


__all__ = [
    "Result",
    "ResultGrid",
    "TorchTrainable",
    "TuneConfig",
    "Tuner",
    "load_checkpoint",
    "report",
]
