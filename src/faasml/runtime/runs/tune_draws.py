"""Which configurations a tuning run trains: the brackets' layout and the sampler's draws.

A successive-halving run is one bracket; a Hyperband run (``tuning.hyperband``) runs its
brackets one after another, bracket b's trials numbered after bracket b − 1's. Bracket b's
configurations are drawn when it starts, by the job's sampler told every earlier trial's
validation metric at each stage end it reached (its budget: the epochs it had trained), so a
model-based sampler (``tpe``, ``gp``) fits what the earlier brackets measured. The sampler is
rebuilt from the trials each time, so a resumed run draws what it would have drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faasml.job import JobSpec
from faasml.runtime.coordinator.ranking import metric_mode, metric_value
from faasml.runtime.coordinator.trial import TrialState


@dataclass(frozen=True)
class Bracket:
    """One successive-halving run among the stages: where its stages and trials start."""

    number: int
    first_stage: int
    stages: int
    first_trial: int
    trials: int
    ends: tuple[int, ...]
    """Each stage's last epoch, counted from the bracket's start (a trial's budget there)."""

    def holds(self, stage: int) -> bool:
        return self.first_stage <= stage < self.first_stage + self.stages

    def is_last_stage(self, stage: int) -> bool:
        return stage == self.first_stage + self.stages - 1

    def trial_ids(self) -> range:
        return range(self.first_trial, self.first_trial + self.trials)


def brackets(job: JobSpec) -> list[Bracket]:
    """The job's brackets in the order they run (one for successive halving)."""
    out, stage, trial = [], 0, 0
    for number, sha in enumerate(job.require_tuning().brackets):
        ends, total = [], 0
        for epochs in sha.epochs:
            total += epochs
            ends.append(total)
        out.append(Bracket(number, stage, sha.stages, trial, sha.trials, tuple(ends)))
        stage += sha.stages
        trial += sha.trials
    return out


def bracket_of(job: JobSpec, stage: int) -> Bracket:
    """The bracket that runs stage ``stage`` (0-based)."""
    return next(b for b in brackets(job) if b.holds(stage))


def draw_bracket(
    job: JobSpec, bracket: Bracket, trials: Sequence[TrialState], search_alg: object = None
) -> tuple[list[dict[str, Any]], str]:
    """Bracket ``bracket``'s configurations given the ``trials`` run so far, and a line saying
    how they were drawn (``search_alg``: an Optuna sampler object in place of the job's)."""
    sampler = job.config_sampler(search_alg)
    tuning = job.require_tuning()
    metric = tuning.metric
    sign = 1.0 if metric_mode(metric, tuning.mode) == "min" else -1.0
    for earlier in brackets(job)[: bracket.number]:
        for trial in trials[earlier.first_trial : earlier.first_trial + earlier.trials]:
            for end in earlier.ends:
                if end <= len(trial.history):
                    value = metric_value(trial.history[end - 1], metric)
                    if value is not None:
                        sampler.observe(trial.config, end, sign * value)
    configs = sampler.draw(bracket.trials, bracket.first_trial)
    budget = sampler.model_budget() if sampler.model_based else None
    if budget is None:
        how = f"drawn by {sampler.name}" + (
            f" at random (no budget has {sampler.min_points} results yet)"
            if sampler.model_based
            else ""
        )
    else:
        seen = len(sampler.results_at(budget))
        how = f"drawn by {sampler.name} from {seen} results at {budget} epoch(s)"
    return configs, how
