"""``TensorBoardCallback``: one TensorBoard run per trial (``<logdir>/trial-<id>``), a scalar
per metric per epoch, and the trial's configuration in the HParams tab when the run ends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from faasml._imports import optional_import
from faasml.runtime.runs.events import RunCallback, RunEnd, RunStart, TrialResult


def hparam_value(value: Any) -> bool | int | float | str:
    """A configuration value as the HParams plugin takes it (others as text)."""
    if isinstance(value, bool | int | float | str):
        return value
    return str(value)


class TensorBoardCallback(RunCallback):
    """Writes TensorBoard event files with tensorboardX (``pip install 'faasml[tensorboard]'``):
    under ``<logdir>/<run dir's name>`` (default ``<run_dir>/tensorboard``), a folder per
    trial with each epoch's
    metrics (step: the epoch) and ``cost_usd``, and, once the run has ended, the trial's
    configuration and last metric as hparams. A run interrupted writes no hparams: its
    restore does."""

    def __init__(self, logdir: str | os.PathLike[str] | None = None) -> None:
        self._tbx = optional_import("tensorboardX", "tensorboard")
        self._summary = optional_import("tensorboardX.summary", "tensorboard")
        self.logdir = None if logdir is None else Path(logdir)
        self._folder = self.logdir or Path("tensorboard")
        self._writers: dict[int, Any] = {}

    def on_run_start(self, event: RunStart) -> None:
        """A log folder given holds the runs side by side (``<logdir>/<run dir's name>``)."""
        run_dir = Path(event.run_dir)
        given = self.logdir
        self._folder = run_dir / "tensorboard" if given is None else given / run_dir.name

    def _writer(self, trial_id: int) -> Any:
        if trial_id not in self._writers:
            folder = self._folder / f"trial-{trial_id}"
            self._writers[trial_id] = self._tbx.SummaryWriter(logdir=str(folder))
        return self._writers[trial_id]

    def on_trial_result(self, event: TrialResult) -> None:
        writer = self._writer(event.trial_id)
        for key, value in event.metrics.items():
            writer.add_scalar(key, value, global_step=event.epoch)
        writer.add_scalar("cost_usd", event.cost_usd, global_step=event.epoch)
        writer.flush()

    def on_run_end(self, event: RunEnd) -> None:
        try:
            if event.status not in ("interrupted", "error"):
                for trial in event.trials:
                    self._hparams(trial)
        finally:
            for writer in self._writers.values():
                writer.close()
            self._writers = {}

    def _hparams(self, trial: TrialResult) -> None:
        """The trial's configuration and last value of the ranking metric (the HParams tab
        reads the metric's scalars of the same run)."""
        config = {key: hparam_value(value) for key, value in trial.config.items()}
        config["faasml.status"] = trial.status
        value = trial.value
        metrics = {trial.metric: value} if value is not None else {}
        writer = self._writer(trial.trial_id)
        for summary in self._summary.hparams(config, metrics):
            writer.file_writer.add_summary(summary)
        writer.flush()
