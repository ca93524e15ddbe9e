"""The shape of a successive-halving (SHA) job: trials q_i and epochs r_i per stage, with the
one rule for the default number of stages and epochs that every part of faasml uses (the job
file, ``faasml plan tune``, the API, the runs and the simulator).

The default is the CE-scaling paper's shape (§IV-B: 16384 trials, η = 2, 14 stages of 2
epochs; Fig. 3: 32 trials in 5 stages), which is also Jamieson and Talwalkar's successive
halving: ⌊log_η trials⌋ stages, so the last stage still ranks η trials. A stage of one trial
more (Hyperband's brackets, Li et al.) ranks nothing and may be asked for with ``stages``.
"""

from __future__ import annotations

from dataclasses import dataclass

from faasml.exceptions import ConfigError

DEFAULT_EPOCHS_PER_STAGE = 2
"""Epochs every trial trains per stage unless told (the paper's 2)."""


def int_log(value: int, base: int) -> int:
    """⌊log_base(value)⌋ in exact integer arithmetic."""
    power, count = base, 0
    while power <= value:
        power *= base
        count += 1
    return count


def most_stages(trials: int, reduction_factor: int) -> int:
    """⌊log_η trials⌋ + 1: the most stages that still leave a trial in the last one."""
    return int_log(trials, reduction_factor) + 1


def default_stages(trials: int, reduction_factor: int) -> int:
    """⌊log_η trials⌋ (at least 1): the last stage still ranks η trials."""
    return max(1, int_log(trials, reduction_factor))


def check_int(name: str, value: object, least: int) -> int:
    """``value`` when it is an integer >= ``least``; else a ConfigError naming both."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"the value of {name} is {value!r}, but must be an integer")
    if value < least:
        raise ConfigError(f"the value of {name} is {value}, but must be {name} >= {least}")
    return value


@dataclass(frozen=True, init=False)
class SuccessiveHalving:
    """A successive-halving job: q_i = ⌊trials / η^i⌋ trials in stage i, each trained r_i epochs.

    ``stages`` defaults to ``default_stages`` (⌊log_η trials⌋) and ``epochs_per_stage`` to
    ``DEFAULT_EPOCHS_PER_STAGE``; ``epochs_per_stage`` is one count for every stage or one per
    stage.
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
        epochs_per_stage: int | tuple[int, ...] | None = None,
    ) -> None:
        trials = check_int("trials", trials, 1)
        eta = check_int("reduction_factor", reduction_factor, 2)
        most = most_stages(trials, eta)
        if stages is None:
            stages = default_stages(trials, eta)
        stages = check_int("stages", stages, 1)
        if stages > most:
            raise ConfigError(
                f"the value of stages is {stages}, but must be stages <= {most} "
                f"(⌊log_{eta} {trials}⌋ + 1): stage {most + 1} would have no trial left"
            )
        if epochs_per_stage is None:
            epochs_per_stage = DEFAULT_EPOCHS_PER_STAGE
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
            check_int(f"epochs_per_stage[{index}]", count, 1)
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
