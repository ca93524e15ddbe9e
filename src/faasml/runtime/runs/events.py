"""Typed run events and the callbacks that receive them (``TuneConfig(callbacks=[...])``).

A run calls each ``RunCallback`` as it goes: ``on_run_start`` once, ``on_trial_result`` for
every epoch a trial commits (after the record holding it is written), ``on_stage_end`` when a
successive-halving stage has ranked and pruned its trials (after its trials' results), and
``on_run_end`` last, also when the run is stopped, interrupted or fails. A callback that
raises an ``Exception`` does not stop the run: it is named in one warning line on stderr and
in the record's events, and called no more in that run (a broken exporter would otherwise
warn at every epoch). ``KeyboardInterrupt`` and ``SystemExit`` pass through: they stop the
run as a Ctrl-C does, its record left to resume.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faasml.job import JobSpec, author_names
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.coordinator.ranking import metric_value
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.record.records import Best, RunRecord
from faasml.runtime.record.run_lock import interrupting, interruption

__all__ = ["RunCallback", "RunEnd", "RunEvents", "RunStart", "StageEnd", "TrialResult"]

EPOCH_METRICS = ("loss", "val_loss", "val_accuracy", "epoch_s", "samples_per_s")
"""The numbers of an epoch's record a trial result carries (with what model code reported)."""


@dataclass(frozen=True)
class RunStart:
    """The run begins (or a resumed one continues)."""

    run_dir: str
    job: str
    """The job's name."""
    kind: str
    """'tune' or 'train'."""
    metric: str
    """The job's ranking metric ('loss', 'accuracy' or a reported metric's name)."""
    mode: str
    """'min' or 'max': how ``metric`` ranks."""
    resumed: bool
    """A run continued from its record: the epochs it had run are not sent again."""


@dataclass(frozen=True)
class TrialResult:
    """One epoch a trial committed."""

    trial_id: int
    config: Mapping[str, Any]
    """By the names its author wrote: a job's dotted paths, a training function's own."""
    epoch: int
    stage: int
    """The stage it ran in, from 1."""
    metrics: Mapping[str, float]
    """The epoch's loss, val_loss, val_accuracy, epoch_s, samples_per_s (those it has) and
    what model code reported (``faasml.report``)."""
    status: str
    """The trial's status as it committed: 'running', 'done' (its stage's epochs), 'diverged'."""
    cost_usd: float
    """What the trial has cost so far (its functions and requests)."""
    spent_usd: float
    """What the run has spent so far, all trials and profiling included."""
    elapsed_s: float
    metric: str
    """The key of ``metrics`` the run ranks by (e.g. 'val_loss')."""

    @property
    def value(self) -> float | None:
        """The ranking metric's value at this epoch (None where the epoch has none)."""
        return self.metrics.get(self.metric)


@dataclass(frozen=True)
class StageEnd:
    """A stage ranked its trials: ``kept`` go on to the next stage, ``pruned`` stop."""

    stage: int
    """From 1."""
    stages: int
    kept: tuple[int, ...]
    pruned: tuple[int, ...]
    stage_usd: float
    """What the stage measured it cost."""
    spent_usd: float
    elapsed_s: float


@dataclass(frozen=True)
class RunEnd:
    """The run ended: finished, stopped (budget), failed, interrupted or an error."""

    status: str
    best: Best | None
    spent_usd: float
    reason: str | None
    """Why it stopped or failed, where it did (None when it finished)."""
    run_dir: str
    trials: tuple[TrialResult, ...] = field(default=())
    """Each trial's last epoch with its final status ('done', 'pruned', 'failed', ...);
    trials that committed no epoch are left out."""


class RunCallback:
    """What a run calls as it goes; every method does nothing unless overridden. Called from
    the run's own thread, one event at a time; an event is not to be changed."""

    def on_run_start(self, event: RunStart) -> None:
        """The run begins or continues."""

    def on_trial_result(self, event: TrialResult) -> None:
        """A trial committed an epoch."""

    def on_stage_end(self, event: StageEnd) -> None:
        """A stage ranked and pruned its trials."""

    def on_run_end(self, event: RunEnd) -> None:
        """The run ended (the last call)."""


def shown_metric(metric: str, metrics: Mapping[str, Any]) -> str:
    """The key of an epoch's metrics that holds the run's ranking ``metric``: val_accuracy
    for accuracy, val_loss for loss (the training loss without a test set), else the
    metric's own name."""
    if metric == "accuracy":
        return "val_accuracy"
    if metric == "loss":
        return "val_loss" if metrics.get("val_loss") is not None else "loss"
    return metric


def epoch_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """An epoch record's numbers: ``EPOCH_METRICS`` it holds, then what model code reported
    under names of its own."""
    metrics = {k: float(record[k]) for k in EPOCH_METRICS if record.get(k) is not None}
    for key, value in (record.get("reported") or {}).items():
        if key not in metrics and isinstance(value, int | float) and not isinstance(value, bool):
            metrics[key] = float(value)
    return metrics


def config_names(job: JobSpec) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A trial's configuration by the names its author wrote (``author_names``), with a
    training function's constants."""
    constants = dict(job.model.options.get("config") or {})
    return lambda config: author_names(job.model.name, config, constants)


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


class RunEvents:
    """Turns a run's progress into events and calls the callbacks, each in a guard."""

    def __init__(
        self,
        callbacks: Sequence[RunCallback],
        note: Callable[[str], None],
        warn: Callable[[str], None] = _warn,
        names: Callable[[Mapping[str, Any]], dict[str, Any]] = dict,
    ) -> None:
        """``note`` adds a line to the run record's events (a callback's error is kept);
        ``names`` gives a trial's configuration as its author wrote it (``config_names``)."""
        self.callbacks = list(callbacks)
        self._names = names
        self._note = note
        self._warn = warn
        self._broken: set[int] = set()
        self._sent: dict[int, int] = {}
        """Epochs of each trial already sent (or run before this process continued it)."""
        self._costs: dict[int, float] = {}
        self._counted = 0
        """Charges summed into ``_costs`` so far."""
        self._last: dict[int, TrialResult] = {}

    def start(
        self, run_dir: str, job: str, kind: str, metric: str, mode: str, trials: list[TrialState]
    ) -> None:
        """The run begins; epochs its trials already hold (a resumed run) are not sent."""
        self._sent = {t.trial_id: len(t.history) for t in trials}
        resumed = any(t.history for t in trials)
        self._call("on_run_start", RunStart(run_dir, job, kind, metric, mode, resumed))

    def results(
        self, trials: Iterable[TrialState], meter: Meter, stage: int, metric: str, elapsed_s: float
    ) -> None:
        """Send every epoch committed since the last call, in the order they ended."""
        new: list[tuple[float, TrialState, int]] = []
        for trial in trials:
            sent = self._sent.get(trial.trial_id, 0)
            for index in range(sent, len(trial.history)):
                new.append((float(trial.history[index].get("t_s", 0.0)), trial, index))
            self._sent[trial.trial_id] = len(trial.history)
        if not new:
            return
        self._count(meter)
        for _, trial, index in sorted(new, key=lambda item: (item[0], item[1].trial_id)):
            result = self._result(trial, index, stage, metric, meter.total_usd, elapsed_s)
            self._last[trial.trial_id] = result
            self._call("on_trial_result", result)

    def _result(
        self,
        trial: TrialState,
        index: int,
        stage: int,
        metric: str,
        spent_usd: float,
        elapsed_s: float,
    ) -> TrialResult:
        """Epoch ``index`` of ``trial``'s history as a result (its status as it is now)."""
        record = trial.history[index]
        metrics = epoch_metrics(record)
        key, value = shown_metric(metric, metrics), metric_value(record, metric)
        if key not in metrics and value is not None:  # a metric evaluated as val_<name>
            metrics[key] = value
        return TrialResult(
            trial_id=trial.trial_id,
            config=self._names(trial.config),
            epoch=int(record.get("epoch", index + 1)),
            stage=stage,
            metrics=metrics,
            status=trial.status,
            cost_usd=self._costs.get(trial.trial_id, 0.0),
            spent_usd=spent_usd,
            elapsed_s=elapsed_s,
            metric=key,
        )

    def stage_end(self, event: StageEnd) -> None:
        self._call("on_stage_end", event)

    def run_end(
        self,
        trials: Iterable[TrialState],
        meter: Meter,
        record: RunRecord,
        err: BaseException | None,
        run_dir: str,
        metric: str,
    ) -> None:
        """The last call: how the run ended (``err``: what stopped it, if anything) and each
        trial's last epoch with its final status."""
        status, reason = record.status, record.stop_reason
        if err is not None:
            status = "interrupted" if interrupting(err) else "error"
            reason = interruption(err) if interrupting(err) else f"{type(err).__name__}: {err}"
        elif status == "failed" and record.events:
            reason = record.events[-1].text
        self._count(meter)
        last = []
        for trial in trials:
            if trial.history:
                previous = self._last.get(trial.trial_id)
                stage = previous.stage if previous is not None else record.stage
                elapsed = previous.elapsed_s if previous is not None else record.elapsed_s
                index = len(trial.history) - 1
                last.append(self._result(trial, index, stage, metric, meter.total_usd, elapsed))
        event = RunEnd(status, record.best, meter.total_usd, reason, run_dir, tuple(last))
        self._call("on_run_end", event)

    def _count(self, meter: Meter) -> None:
        """Add the charges billed since the last count to their trials' costs."""
        charges = meter.charges
        for charge in charges[self._counted :]:
            if charge.trial >= 0:
                self._costs[charge.trial] = self._costs.get(charge.trial, 0.0) + charge.usd
        self._counted = len(charges)

    def _call(self, method: str, event: object) -> None:
        """Call ``method`` of every callback that has not failed yet; an ``Exception`` from
        one is warned and recorded once, and that callback is dropped for the run."""
        for callback in self.callbacks:
            if id(callback) in self._broken:
                continue
            try:
                getattr(callback, method)(event)
            except Exception as err:
                self._broken.add(id(callback))
                said = " ".join(str(err).split())  # one line, whatever the message
                text = (
                    f"callback {type(callback).__name__}.{method} raised "
                    f"{type(err).__name__}: {said}; the run goes on without it"
                )
                self._note(text)
                self._warn(text)
