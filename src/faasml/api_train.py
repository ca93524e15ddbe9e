"""``faasml.Trainer``: ``faasml train`` from Python, shaped like ``faasml.Tuner``.

One configuration trained to ``target_loss`` or ``max_epochs`` within a budget or a deadline,
re-planned after every epoch (``runtime.train_run``). The job is a job file, or a training loop
``train_loop(config, ctx)`` / training function returning ``TorchTrainable`` with its
``config``, turned into a job as the Tuner does.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from faasml.api import Tuner
from faasml.exceptions import ConfigError
from faasml.job import JobSpec, from_mapping
from faasml.results import Result, ResultGrid


class Trainer:
    """Trains ``job`` (a job file path, or a training loop or function with its ``config``)
    to ``target_loss`` (the validation loss; a loop's reported ``loss``) or ``max_epochs``
    within ``budget`` (USD) or ``deadline`` (seconds); ``fit()`` returns its ``Result``."""

    def __init__(
        self,
        job: str | os.PathLike[str] | Callable[..., Any],
        config: Mapping[str, Any] | None = None,
        *,
        budget: float | None = None,
        deadline: float | None = None,
        max_epochs: int | None = None,
        target_loss: float | None = None,
        settings: Mapping[str, Any] | None = None,
        run_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        training = {
            key: value
            for key, value in (
                ("training.max_epochs", max_epochs),
                ("training.target_loss", target_loss),
            )
            if value is not None
        }
        given = {**dict(settings or {}), **training}
        self._config = dict(config or {})
        if callable(job) and not isinstance(job, JobSpec):
            if not self._config:
                raise ConfigError(
                    "config is empty, but a Trainer trains the configuration it is given: "
                    "pass the values the function reads from config, e.g. {'lr': 0.01}"
                )
            # The Tuner turns the function into a job; each value a choice of one.
            space = {key: {"choice": [value]} for key, value in self._config.items()}
            tuner = Tuner(
                job, space, budget=budget, deadline=deadline, settings=given, run_dir=run_dir
            )
            data = tuner.job.to_dict(redact=False)
            data.pop("search_space", None)
            data.pop("tuning", None)
            self.job = from_mapping(data)
            self.run_dir, self.constraint = tuner.run_dir, tuner.constraint
        else:
            if self._config:
                raise ConfigError("config is for a function; a job file's values go in settings")
            self._from_file(Path(job), given, budget, deadline, run_dir)

    def _from_file(
        self,
        path: Path,
        overrides: dict[str, Any],
        budget: float | None,
        deadline: float | None,
        run_dir: str | os.PathLike[str] | None,
    ) -> None:
        from faasml.runtime.record.run_dir import RunDir
        from faasml.runtime.runs.loop_job import loop_job, read_job
        from faasml.types import Constraint

        if budget is None and deadline is None:
            raise ConfigError("give a budget or a deadline (or both)")
        self.constraint = Constraint(budget_usd=budget, deadline_s=deadline)
        job = read_job(path, overrides)
        self.run_dir = Path(run_dir) if run_dir is not None else Path("runs") / job.name
        RunDir(self.run_dir).check_new()
        self.job = loop_job(job, self.run_dir / "function")

    def fit(self) -> Result:
        """Plan, train for real and return the trained configuration's ``Result``."""
        from faasml.reports.run_outputs import write_outputs
        from faasml.runtime.record.run_dir import RunDir
        from faasml.runtime.record.run_lock import lock_run
        from faasml.runtime.runs.session import TrainRun

        with lock_run(self.run_dir):
            if RunDir(self.run_dir).record_path.exists():
                RunDir(self.run_dir).check_new()  # a run began in it since: refused
            run = TrainRun(self.job, self.constraint, self.run_dir, outputs=write_outputs)
            run.plan()
            record = run.execute()
        if record.status == "failed" and record.stop_reason:  # e.g. a loop without its loss
            raise ConfigError(f"{record.stop_reason}; see {self.run_dir / 'report.md'}")
        result = ResultGrid.from_record(record, self.run_dir)[0]
        return dataclasses.replace(result, config={**result.config, **self._config})


__all__ = ["Trainer"]
