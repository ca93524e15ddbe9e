"""Which configurations a tuning run trains: the brackets' layout and the sampler's draws.

A successive-halving run is one bracket; a Hyperband run (``tuning.hyperband``) runs its
brackets one after another, bracket b's trials numbered after bracket b − 1's. Bracket b's
configurations are drawn when it starts, by the job's sampler told every earlier trial's
validation metric at each stage end it reached (its budget: the epochs it had trained), so a
model-based sampler (``tpe``, ``gp``) fits what the earlier brackets measured. The sampler is
rebuilt from the trials each time, so a resumed run draws what it would have drawn.

Within a bracket's first stage a model-based sampler also learns from the stage itself where
the platform runs it in more than one wave (trials beyond one wave wait anyway): the stage
trains in batches of whole waves, and the trials of each later batch are drawn from what the
batches before measured (``stage_batches``). The trials and epochs stay the plan's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from faasml.catalog import Catalog
from faasml.job import JobSpec
from faasml.runtime.coordinator.ranking import metric_mode, metric_value
from faasml.runtime.coordinator.trial import TrialState
from faasml.samplers import ConfigSampler
from faasml.types import Allocation

MAX_BATCHES = 16
"""Most batches a stage trains in: each waits for the one before to end, so a few trials of
a batch may leave functions idle that the next batch's would have used."""


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


def _told(
    job: JobSpec,
    bracket: Bracket,
    trials: Sequence[TrialState],
    search_alg: object = None,
    measured: Sequence[TrialState] = (),
) -> ConfigSampler:
    """The job's sampler told every earlier bracket's validation metric at each stage end its
    trials reached (their budget: the epochs trained), and ``measured``'s (trials of
    ``bracket``) at its first stage's end."""
    sampler = job.config_sampler(search_alg)
    tuning = job.require_tuning()
    metric = tuning.metric
    sign = 1.0 if metric_mode(metric, tuning.mode) == "min" else -1.0
    told = [
        (trial, earlier.ends)
        for earlier in brackets(job)[: bracket.number]
        for trial in trials[earlier.first_trial : earlier.first_trial + earlier.trials]
    ]
    told += [(trial, bracket.ends[:1]) for trial in measured]
    for trial, ends in told:
        for end in ends:
            if end <= len(trial.history):
                value = metric_value(trial.history[end - 1], metric)
                if value is not None:
                    sampler.observe(trial.config, end, sign * value)
    return sampler


def _how(sampler: ConfigSampler) -> str:
    """How ``sampler`` draws now: at random, or from its model's results."""
    budget = sampler.model_budget() if sampler.model_based else None
    if budget is None:
        return f"drawn by {sampler.name}" + (
            f" at random (no budget has {sampler.min_points} results yet)"
            if sampler.model_based
            else ""
        )
    seen = len(sampler.results_at(budget))
    return f"drawn by {sampler.name} from {seen} results at {budget} epoch(s)"


def draw_bracket(
    job: JobSpec, bracket: Bracket, trials: Sequence[TrialState], search_alg: object = None
) -> tuple[list[dict[str, Any]], str]:
    """Bracket ``bracket``'s configurations given the ``trials`` run so far, and a line saying
    how they were drawn (``search_alg``: an Optuna sampler object in place of the job's)."""
    sampler = _told(job, bracket, trials, search_alg)
    return sampler.draw(bracket.trials, bracket.first_trial), _how(sampler)


def trials_at_once(catalog: Catalog, allocation: Allocation) -> int:
    """Trials of ``allocation`` the platform runs at once (one wave): the planner's k(θ)."""
    limit = int(catalog.platform.max_concurrent(allocation.memory_mb))
    return max(1, limit // allocation.n)


def batch_sizes(trials: int, wave: int, first: int) -> list[int]:
    """``trials`` in batches of whole waves of ``wave`` trials: the first at least ``first``
    trials, then a wave each, at most MAX_BATCHES in all (the later ones longer)."""
    head = min(trials, max(1, math.ceil(first / wave)) * wave)
    waves = math.ceil((trials - head) / wave)
    count = min(waves, MAX_BATCHES - 1)
    sizes, left = [head], trials - head
    for i in range(count):
        size = min((waves // count + (i >= count - waves % count)) * wave, left)
        sizes.append(size)
        left -= size
    return sizes


def _fit(sampler: ConfigSampler) -> tuple[int, tuple[tuple[str, float], ...]] | None:
    """What the sampler's model is fitted on (its budget and results); None: no model."""
    budget = sampler.model_budget() if sampler.model_based else None
    if budget is None:
        return None
    seen = sorted((repr(sorted(c.items())), v) for c, v in sampler.results_at(budget))
    return budget, tuple(seen)


def stage_batches(
    job: JobSpec,
    bracket: Bracket,
    stage: int,
    trials: Sequence[TrialState],
    alive: Sequence[TrialState],
    wave: int,
    search_alg: object = None,
    event: Callable[[str], None] | None = None,
) -> Iterator[tuple[list[TrialState], bool]]:
    """Stage ``stage``'s ``alive`` trials in the batches the run trains one after another,
    each yielded (with whether it is the last) once the batches before it trained.

    A bracket's first stage, drawn by a model-based sampler, that runs in more than one wave
    of ``wave`` trials: the first batch (the sampler's ``min_points`` trials where it has no
    model yet, else a wave) trains as drawn; each later batch's trials not started are drawn
    again from the sampler told what the batches before measured, where that changed its
    model's results. A resumed run draws the same. Any other stage is one batch."""
    sampler = _told(job, bracket, trials, search_alg)
    ids = bracket.trial_ids()
    if stage != bracket.first_stage or not sampler.model_based or wave >= len(ids):
        yield list(alive), True
        return
    first = wave if sampler.model_budget() is not None else sampler.min_points
    sizes = batch_sizes(len(ids), wave, first)
    own, running = list(trials[ids.start : ids.stop]), {t.trial_id for t in alive}
    start, key, since = 0, _fit(sampler), -1
    for number, size in enumerate(sizes):
        batch = own[start : start + size]
        if number:
            told = _told(job, bracket, trials, search_alg, own[:start])
            if _fit(told) != key:
                key, since = _fit(told), start
                if event is not None:
                    a, b = batch[0].trial_id, batch[-1].trial_id
                    which = f"trial {a}" if a == b else f"trials {a}-{b}"
                    event(f"stage {stage + 1}: {which} {_how(told)}")
            if since >= 0:  # the batch's configurations from the model as it stands
                drawn = told.draw(start + size - since, ids.start + since)[start - since :]
                for trial, config in zip(batch, drawn, strict=True):
                    if not trial.history:
                        trial.config = config
        chosen = [t for t in batch if t.trial_id in running]
        if chosen:
            yield chosen, number == len(sizes) - 1
        start += size
