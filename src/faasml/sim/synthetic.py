"""Loss curves for the training simulator: synthetic families with noise, or a recorded run.

A synthetic curve is pinned by what matters to a planner: its initial loss l(0), its floor, and
the epoch E at which its mean reaches the target loss. Four families: the three the fitter
knows (``inverse``, ``exponential``, ``power``) and ``step``, a learning-rate drop that none of
them describes (a plateau, then a second descent), to test the fitter off its own model.
Observed losses add multiplicative Gaussian noise and rare upward spikes, drawn from a
generator seeded by (seed, epoch), so the loss of an epoch does not depend on what was asked
before.

``sample_run`` simulates the LambdaML-style offline estimate's input: training on a small
sample of the data, whose progress per epoch differs from the full data's by a random factor
(log-normal, ``mismatch``): the simulator's model of why offline predictions miss
(CE-scaling Fig. 4a reports errors up to 40 %).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml.exceptions import ConfigError
from faasml.models.convergence import fit_loss_curve
from faasml.sim.curves import LossCurve

Array = NDArray[np.float64]

SYNTHETIC_FAMILIES = ("inverse", "exponential", "power", "step")

MAX_EPOCHS_TO_TARGET = 1_000
"""Most epochs a synthetic curve may take to reach its target: a simulated run steps through
every epoch (and re-fits its loss curve at each), so a longer curve would run for hours."""


class TrainingCurve(Protocol):
    """What the simulator reads: the loss observed at the end of each epoch."""

    @property
    def target_loss(self) -> float:
        """The loss the run trains to."""
        ...

    def observed(self, epoch: int) -> float:
        """Loss observed at the end of ``epoch`` (1-based); KeyError past a recording's end."""
        ...

    def mean(self, epochs: ArrayLike) -> Array:
        """The noise-free curve (a fit, for a recording), at fractional epochs."""
        ...

    @property
    def true_epochs(self) -> int:
        """Epochs the run really needs: the first epoch whose loss reaches the target."""
        ...


@dataclass(frozen=True)
class SyntheticCurve:
    """A noisy loss curve of one family, pinned by l(0), its floor and E (see module doc)."""

    family: str
    initial_loss: float
    floor: float
    target_loss: float
    epochs_to_target: float
    noise: float = 0.01
    """Standard deviation of the multiplicative noise on each observed loss."""
    spike_probability: float = 0.02
    """Chance that an epoch's loss jumps up by 5–20 % (a bad minibatch, a restart)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.family not in SYNTHETIC_FAMILIES:
            raise ConfigError(
                f"the value of family is {self.family!r}, but must be one of: "
                f"{', '.join(SYNTHETIC_FAMILIES)}"
            )
        if not 0 <= self.floor < self.target_loss < self.initial_loss:
            raise ConfigError(
                f"a synthetic curve needs 0 <= floor < target < initial loss; got floor "
                f"{self.floor:g}, target {self.target_loss:g}, initial {self.initial_loss:g}"
            )
        if not 1 <= self.epochs_to_target <= MAX_EPOCHS_TO_TARGET:
            raise ConfigError(
                f"the value of epochs_to_target is {self.epochs_to_target}, but must be "
                f"between 1 and {MAX_EPOCHS_TO_TARGET:,}"
            )
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, numbers.Integral)
            or self.seed < 0
        ):
            raise ConfigError(f"the value of seed is {self.seed!r}, but must be an integer >= 0")
        if not 0 <= self.noise < math.inf or not 0 <= self.spike_probability <= 1:
            raise ConfigError(
                f"noise is {self.noise} and spike_probability {self.spike_probability}, but noise "
                "must be a finite number >= 0 and spike_probability in [0, 1]"
            )

    def mean(self, epochs: ArrayLike) -> Array:
        k = np.asarray(epochs, dtype=float)
        l0, c, target, e = self.initial_loss, self.floor, self.target_loss, self.epochs_to_target
        ratio = (l0 - c) / (target - c)
        if self.family == "inverse":
            rho = (target - c) * e / (l0 - target)
            return (l0 - c) * rho / (k + rho) + c
        if self.family == "exponential":
            return (l0 - c) * np.exp(-math.log(ratio) / e * k) + c
        if self.family == "power":
            return (l0 - c) * (k + 1.0) ** (-math.log(ratio) / math.log(e + 1.0)) + c
        # step: decay to a plateau, a learning-rate drop at 60 % of E, then a second descent.
        drop = 0.6 * e
        plateau = target + 0.3 * (l0 - target)
        first = (l0 - plateau) * np.exp(-4.0 / drop * k) + plateau
        at_drop = (l0 - plateau) * math.exp(-4.0) + plateau
        rate = math.log((at_drop - c) / (target - c)) / (e - drop)
        second = (at_drop - c) * np.exp(-rate * (k - drop)) + c
        return np.where(k <= drop, first, second)

    def observed(self, epoch: int) -> float:
        rng = np.random.default_rng([self.seed, epoch])
        value = float(self.mean(float(epoch))) * (1.0 + self.noise * float(rng.standard_normal()))
        if rng.random() < self.spike_probability:
            value *= 1.0 + rng.uniform(0.05, 0.2)
        return max(value, 0.0)

    @property
    def true_epochs(self) -> int:
        """The first epoch whose observed (noisy) loss reaches the target: what a run needs.
        Noise can make it earlier or later than ⌈epochs_to_target⌉, the mean curve's crossing."""
        limit = 10 * math.ceil(self.epochs_to_target) + 100
        for epoch in range(1, limit + 1):
            if self.observed(epoch) <= self.target_loss:
                return epoch
        raise ConfigError(
            f"the {self.family} curve does not reach {self.target_loss:g} within {limit} epochs"
        )


@dataclass(frozen=True)
class RecordedCurve:
    """A loss curve recorded by a real run (``faasml.sim.curves`` file), replayed epoch by epoch."""

    curve: LossCurve
    target_loss: float

    def __post_init__(self) -> None:
        if len(self.curve) < 3:
            raise ConfigError(
                f"the recorded curve {self.curve.source or ''} has {len(self.curve)} points, "
                "but the simulator needs at least 3"
            )

    def observed(self, epoch: int) -> float:
        for point in self.curve.points:
            if point.epoch == epoch:
                return point.loss
        raise KeyError(epoch)

    def mean(self, epochs: ArrayLike) -> Array:
        fit = fit_loss_curve(self.curve.epochs, self.curve.losses)
        return fit.predict(np.asarray(epochs, dtype=float))

    @property
    def last_epoch(self) -> int:
        return self.curve.points[-1].epoch

    @property
    def true_epochs(self) -> int:
        for point in self.curve.points:
            if point.epoch >= 1 and point.loss <= self.target_loss:
                return point.epoch
        raise ConfigError(
            f"the recorded curve {self.curve.source or ''} never reaches the target loss "
            f"{self.target_loss:g} (its lowest loss is {min(self.curve.losses):g})"
        )


def synthetic_curve(
    family: str,
    target_loss: float,
    epochs_to_target: float,
    *,
    initial_ratio: float = 3.0,
    floor_ratio: float = 0.5,
    noise: float = 0.01,
    seed: int = 0,
) -> SyntheticCurve:
    """A curve reaching ``target_loss`` after ``epochs_to_target`` epochs, starting at
    ``initial_ratio`` × target and tending to ``floor_ratio`` × target."""
    return SyntheticCurve(
        family=family,
        initial_loss=target_loss * initial_ratio,
        floor=target_loss * floor_ratio,
        target_loss=target_loss,
        epochs_to_target=epochs_to_target,
        noise=noise,
        seed=seed,
    )


def random_curve(
    rng: np.random.Generator,
    target_loss: float = 1.0,
    *,
    families: Sequence[str] = SYNTHETIC_FAMILIES,
    epochs: tuple[float, float] = (15.0, 80.0),
    noise: tuple[float, float] = (0.003, 0.02),
) -> SyntheticCurve:
    """A random curve for benchmarks and property tests: family, E, l(0), floor, noise drawn."""
    return SyntheticCurve(
        family=str(rng.choice(list(families))),
        initial_loss=target_loss * float(rng.uniform(1.5, 4.0)),
        floor=target_loss * float(rng.uniform(0.2, 0.8)),
        target_loss=target_loss,
        epochs_to_target=float(rng.uniform(*epochs)),
        noise=float(rng.uniform(*noise)),
        seed=int(rng.integers(2**31)),
    )


def sample_run(
    curve: TrainingCurve,
    *,
    epochs: int = 10,
    mismatch: float = 0.35,
    noise: float = 0.01,
    seed: int = 0,
) -> tuple[list[int], list[float]]:
    """Losses of a simulated training run on a small sample of the data (LambdaML-style offline
    estimate's input): epoch j of the sample progresses like epoch j·s of the full data, with
    s log-normal (σ = ``mismatch``), plus noise."""
    if epochs < 3:
        raise ConfigError(f"the value of epochs is {epochs}, but a sample run needs >= 3")
    rng = np.random.default_rng([seed, 7])
    speed = float(np.exp(rng.normal(0.0, mismatch))) if mismatch > 0 else 1.0
    js = np.arange(1, epochs + 1, dtype=float)
    losses = curve.mean(js * speed) * (1.0 + noise * rng.standard_normal(js.size))
    return [int(j) for j in js], [max(float(v), 0.0) for v in losses]
