"""Tuning jobs as the planner sees them: trials q_i and epochs r_i per stage (CE-scaling §III-C).

A successive-halving (SHA) job starts ``trials`` trials and keeps the best 1/η of them after
every stage; Hyperband runs several SHA brackets one after another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from faasml.exceptions import ConfigError


class TuningJob(Protocol):
    """What a tuning planner needs of a job: q_i and r_i of CE-scaling eqs. 7–8, per stage."""

    @property
    def trial_counts(self) -> tuple[int, ...]: ...

    @property
    def epochs(self) -> tuple[int, ...]: ...


def _int_log(value: int, base: int) -> int:
    """⌊log_base(value)⌋ in exact integer arithmetic."""
    power, count = base, 0
    while power <= value:
        power *= base
        count += 1
    return count


def _check_int(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"the value of {name} is {value!r}, but must be an integer")
    if value < least:
        raise ConfigError(f"the value of {name} is {value}, but must be {name} >= {least}")
    return value


@dataclass(frozen=True, init=False)
class SuccessiveHalving:
    """A successive-halving job: q_i = ⌊trials / η^i⌋ trials in stage i, each trained r_i epochs.

    ``stages`` defaults to ⌊log_η trials⌋ (at least 1), so the last stage still compares η
    trials: 16384 trials with η = 2 give the paper's 14 stages (CE-scaling §IV-B).
    ``epochs_per_stage`` is one count for every stage or one per stage.
    """

    trials: int
    reduction_factor: int
    stages: int
    epochs_per_stage: tuple[int, ...]

    def __init__(
        self,
        trials: int,
        reduction_factor: int = 2,
        stages: int | None = None,
        epochs_per_stage: int | tuple[int, ...] = 2,
    ) -> None:
        trials = _check_int("trials", trials, 1)
        eta = _check_int("reduction_factor", reduction_factor, 2)
        most = _int_log(trials, eta) + 1
        if stages is None:
            stages = max(1, most - 1)
        stages = _check_int("stages", stages, 1)
        if stages > most:
            raise ConfigError(
                f"the value of stages is {stages}, but must be stages <= {most} "
                f"(⌊log_{eta} {trials}⌋ + 1): stage {most + 1} would have no trial left"
            )
        if isinstance(epochs_per_stage, int):
            epochs: tuple[int, ...] = (epochs_per_stage,) * stages
        else:
            epochs = tuple(epochs_per_stage)
            if len(epochs) != stages:
                raise ConfigError(
                    f"the value of epochs_per_stage has {len(epochs)} entries, but must have "
                    f"one per stage ({stages})"
                )
        for index, count in enumerate(epochs):
            _check_int(f"epochs_per_stage[{index}]", count, 1)
        object.__setattr__(self, "trials", trials)
        object.__setattr__(self, "reduction_factor", eta)
        object.__setattr__(self, "stages", stages)
        object.__setattr__(self, "epochs_per_stage", epochs)

    @property
    def trial_counts(self) -> tuple[int, ...]:
        """q_i: trials that run in stage i (the best 1/η of the previous stage's)."""
        return tuple(self.trials // self.reduction_factor**i for i in range(self.stages))

    @property
    def epochs(self) -> tuple[int, ...]:
        """r_i: epochs every trial of stage i trains in that stage."""
        return self.epochs_per_stage


@dataclass(frozen=True)
class Stages:
    """Any sequence of stages, given by q_i and r_i (e.g. Hyperband's brackets run in turn)."""

    trial_counts: tuple[int, ...]
    epochs: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.trial_counts:
            raise ConfigError("a tuning job needs at least one stage; none was given")
        if len(self.trial_counts) != len(self.epochs):
            raise ConfigError(
                f"{len(self.trial_counts)} trial counts and {len(self.epochs)} epoch counts "
                "were given, but there must be one of each per stage"
            )
        for index, (trials, epochs) in enumerate(zip(self.trial_counts, self.epochs, strict=True)):
            _check_int(f"trials of stage {index + 1}", trials, 1)
            _check_int(f"epochs of stage {index + 1}", epochs, 1)


def hyperband(max_epochs: int, reduction_factor: int = 3) -> tuple[SuccessiveHalving, ...]:
    """Hyperband's brackets (Li et al., JMLR 2018) for a largest budget of ``max_epochs`` epochs.

    s_max = ⌊log_η R⌋; bracket s starts n = ⌈(s_max + 1)·η^s / (s + 1)⌉ trials of R·η^-s epochs
    each and halves s times. Trials resume from their checkpoint, so stage i trains the
    difference r_i − r_{i−1} (rounded, at least one epoch). Most exploratory bracket first.
    """
    top = _check_int("max_epochs", max_epochs, 1)
    eta = _check_int("reduction_factor", reduction_factor, 2)
    s_max = _int_log(top, eta)
    brackets = []
    for s in range(s_max, -1, -1):
        trials = -(-(s_max + 1) * eta**s // (s + 1))
        totals = [max(1, round(top * eta ** (i - s))) for i in range(s + 1)]
        epochs = tuple(max(1, b - a) for a, b in zip([0, *totals[:-1]], totals, strict=True))
        brackets.append(SuccessiveHalving(trials, eta, s + 1, epochs))
    return tuple(brackets)


def concatenate(jobs: tuple[TuningJob, ...] | list[TuningJob]) -> Stages:
    """The stages of several jobs run one after another (e.g. every Hyperband bracket)."""
    return Stages(
        trial_counts=tuple(q for job in jobs for q in job.trial_counts),
        epochs=tuple(r for job in jobs for r in job.epochs),
    )
