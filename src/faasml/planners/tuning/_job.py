"""Tuning jobs as the planner sees them: trials q_i and epochs r_i per stage (CE-scaling §III-C).

A successive-halving (SHA) job (``faasml.models.shape``, the one rule for its default
stages and epochs) starts ``trials`` trials and keeps the best 1/η of them after
every stage; Hyperband runs several SHA brackets one after another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from faasml.exceptions import ConfigError
from faasml.models.shape import SuccessiveHalving
from faasml.models.shape import check_int as _check_int
from faasml.models.shape import int_log as _int_log


class TuningJob(Protocol):
    """What a tuning planner needs of a job: q_i and r_i of CE-scaling eqs. 7–8, per stage."""

    @property
    def trial_counts(self) -> tuple[int, ...]: ...

    @property
    def epochs(self) -> tuple[int, ...]: ...


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
