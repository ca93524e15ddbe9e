"""The Python API, in the shape Ray Tune and Optuna users know.

    import faasml

    tuner = faasml.Tuner(
        "examples/tune-logreg.yaml",
        param_space={"optimizer.lr": {"loguniform": [0.001, 1.0]}},
        tune_config=faasml.TuneConfig(budget=0.05, num_samples=8),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print(best.config, best.metrics["val_loss"])

``Tuner.fit`` plans the successive-halving stages within the budget or deadline, runs every
trial for real on the job's platform and returns the results; the run directory holds the
record, the report and the plots. ``faasml.report(...)`` records extra metrics from model code.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faasml.config import JobSpec, load_job
from faasml.exceptions import ConfigError
from faasml.runtime.context import report
from faasml.types import Constraint, Objective


@dataclass(frozen=True)
class TuneConfig:
    """What to tune within: a budget (US dollars), a deadline (seconds) or both, and the SHA
    shape (``num_samples`` trials, keep 1/``reduction_factor`` per stage)."""

    budget: float | None = None
    deadline: float | None = None
    num_samples: int | None = None
    reduction_factor: int | None = None
    epochs_per_stage: int | None = None
    metric: str | None = None
    mode: str | None = None
    """'min' for loss, 'max' for accuracy (Ray Tune's spelling); implied by ``metric``."""
    minimise: str | None = None
    """With both bounds: 'time' (default) or 'cost'."""

    def constraint(self) -> Constraint:
        objective = None
        if self.minimise is not None:
            if self.minimise not in ("time", "cost"):
                raise ConfigError(
                    f"the value of minimise is {self.minimise!r}, but must be 'time' or 'cost'"
                )
            objective = Objective.MIN_TIME if self.minimise == "time" else Objective.MIN_COST
        return Constraint(self.budget, self.deadline, objective)


@dataclass(frozen=True)
class Result:
    """One trial's outcome."""

    trial_id: int
    config: dict[str, Any]
    metrics: dict[str, Any]
    """The last epoch's record: loss, val_loss, val_accuracy, epoch_s, ..."""
    status: str
    checkpoint: str | None
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ResultGrid:
    """Every trial of a tuning run and the run's record."""

    results: list[Result]
    record: dict[str, Any]
    run_dir: Path

    def get_best_result(self) -> Result:
        best = self.record.get("best")
        if not best:
            raise ConfigError(
                f"no trial finished ({self.record.get('status')}); see {self.run_dir / 'report.md'}"
            )
        return next(r for r in self.results if r.trial_id == best["trial"])

    @property
    def spent_usd(self) -> float:
        return float(sum(c["usd"] for c in self.record.get("charges", [])))

    def __len__(self) -> int:
        return len(self.results)


class Tuner:
    """Tunes a job (a job file or a ``JobSpec``) within a budget or a deadline."""

    def __init__(
        self,
        job: str | os.PathLike[str] | JobSpec,
        *,
        param_space: Mapping[str, Any] | None = None,
        tune_config: TuneConfig | None = None,
        run_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        config = tune_config or TuneConfig()
        overrides: dict[str, Any] = {}
        if param_space is not None:
            overrides["search_space"] = dict(param_space)
        for key, value in (
            ("tuning.trials", config.num_samples),
            ("tuning.reduction_factor", config.reduction_factor),
            ("tuning.epochs_per_stage", config.epochs_per_stage),
            ("tuning.metric", config.metric),
        ):
            if value is not None:
                overrides[key] = value
        if config.mode is not None and config.mode not in ("min", "max"):
            raise ConfigError(f"the value of mode is {config.mode!r}, but must be 'min' or 'max'")
        if isinstance(job, JobSpec):
            data = job.to_dict(redact=False)
            for key, value in overrides.items():
                _set(data, key, value)
            self.job = JobSpec.from_mapping(data, source=job.source)
        else:
            self.job = load_job(Path(job), overrides)
        self.job.require_tuning()
        self.constraint = config.constraint()
        self.run_dir = Path(
            run_dir or Path("runs") / f"{self.job.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        )

    def fit(self) -> ResultGrid:
        """Plan, run every stage for real and return the results."""
        from faasml.reports.run_dir import RunDir
        from faasml.runtime.session import TuneRun

        RunDir(self.run_dir).check_new()  # never over a run that is there
        run = TuneRun(self.job, self.constraint, self.run_dir)
        run.plan()
        record = run.execute()
        results = [
            Result(
                trial_id=t["trial_id"],
                config=t["config"],
                metrics=t["history"][-1] if t["history"] else {},
                status=t["status"],
                checkpoint=t["checkpoint"],
                history=t["history"],
            )
            for t in record["trials"]
        ]
        return ResultGrid(results, record, self.run_dir)


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


__all__ = ["Result", "ResultGrid", "TuneConfig", "Tuner", "report"]
