"""``MLflowCallback``: one MLflow run per trial, its configuration as params, its metrics per
epoch (step: the epoch) and its status when it ends; a file store needs no server."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from faasml._imports import optional_import
from faasml.runtime.runs.events import RunCallback, RunEnd, RunStart, StageEnd, TrialResult

ENDED = {"done": "FINISHED", "pruned": "FINISHED", "failed": "FAILED", "diverged": "FAILED"}
"""A trial's status at the run's end as MLflow's run status (others: KILLED, stopped early)."""


class MLflowCallback(RunCallback):
    """Logs every trial to MLflow (``pip install 'faasml[mlflow]'``) at ``tracking_uri``
    (``file:./mlruns`` is a folder, no server; None: MLflow's own default), in the experiment
    ``experiment_name``. A trial's run is tagged with the faasml run and trial, so a restored
    run logs on into the same MLflow runs. MLflow 3 keeps its file store in maintenance mode
    behind ``MLFLOW_ALLOW_FILE_STORE``: a ``file:`` URI given here sets it for this process."""

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment_name: str = "faasml",
        tags: dict[str, str] | None = None,
    ) -> None:
        optional_import("mlflow", "mlflow")
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.tags = dict(tags or {})
        if tracking_uri is not None and tracking_uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._client: Any = None
        self._experiment = ""
        self._run_key = ""
        self._run_dir = ""
        self._job = ""
        self._runs: dict[int, str] = {}

    def on_run_start(self, event: RunStart) -> None:
        from mlflow.tracking import MlflowClient

        self._client = client = MlflowClient(tracking_uri=self.tracking_uri)
        found = client.get_experiment_by_name(self.experiment_name)
        if found is None:
            self._experiment = client.create_experiment(self.experiment_name)
        else:
            self._experiment = found.experiment_id
        self._run_dir = str(Path(event.run_dir).resolve())
        self._run_key = hashlib.sha256(self._run_dir.encode()).hexdigest()[:16]
        self._job = event.job
        self._runs = {}  # a callback given to several runs logs each into its own
        if event.resumed:  # the trials' MLflow runs the run made before it stopped
            query = f"tags.`faasml.run` = '{self._run_key}'"
            for run in client.search_runs([self._experiment], filter_string=query):
                self._runs[int(run.data.tags["faasml.trial"])] = run.info.run_id

    def _run_id(self, trial: TrialResult) -> str:
        """The trial's MLflow run, made (with its configuration as params) on first use."""
        if trial.trial_id not in self._runs:
            tags = {
                **self.tags,
                "faasml.run": self._run_key,
                "faasml.run_dir": self._run_dir,
                "faasml.job": self._job,
                "faasml.trial": str(trial.trial_id),
            }
            run = self._client.create_run(
                self._experiment, run_name=f"{self._job}-trial-{trial.trial_id}", tags=tags
            )
            self._runs[trial.trial_id] = run_id = run.info.run_id
            from mlflow.entities import Param

            params = [Param(str(k), str(v)) for k, v in trial.config.items()]
            self._client.log_batch(run_id, params=params)
        return self._runs[trial.trial_id]

    def on_trial_result(self, event: TrialResult) -> None:
        from mlflow.entities import Metric

        run_id = self._run_id(event)
        now = int(time.time() * 1000)
        values = {**event.metrics, "cost_usd": event.cost_usd}
        metrics = [Metric(k, float(v), now, event.epoch) for k, v in values.items()]
        self._client.log_batch(run_id, metrics=metrics)

    def on_stage_end(self, event: StageEnd) -> None:
        for trial_id in event.pruned:
            if trial_id in self._runs:
                self._end(self._runs[trial_id], "pruned", "FINISHED")

    def on_run_end(self, event: RunEnd) -> None:
        for trial in event.trials:
            if trial.status == "pruned":
                continue  # ended with its stage
            run_id = self._run_id(trial)
            self._end(run_id, trial.status, ENDED.get(trial.status, "KILLED"))

    def _end(self, run_id: str, status: str, mlflow_status: str) -> None:
        self._client.set_tag(run_id, "faasml.status", status)
        self._client.set_terminated(run_id, mlflow_status)
