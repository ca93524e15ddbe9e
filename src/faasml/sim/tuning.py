"""Simulated execution of a tuning plan (MISSION C10) on the shared event loop.

Stage by stage, every trial of the stage is queued; a trial starts when the platform has n
free function slots at its memory (``max_concurrent(m)``), pays a cold start, trains r_i
epochs whose times are the model's t'(θ) times mean-one log-normal noise, and frees its slots.
The stage ends when its last trial ends (successive halving evaluates synchronously); the next
stage starts then. Every trial is billed with the model's per-epoch prices, its GB-seconds
and time-priced storage scaled by how long it really ran. On a bounded machine each trial runs
at the contention of the wave it starts in, as the stage model (``faasml.models.stages``) that
the planner optimises prices it. With no noise the simulation reproduces the planner's
prediction exactly; under a seed it is deterministic.
"""

from __future__ import annotations

import math
import numbers
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.cost import startup_cost
from faasml.models.stages import trial_contentions
from faasml.sim.engine import EventLoop
from faasml.types import StagePlan, TunePlan


@dataclass(frozen=True)
class SimulatedStage:
    """What one stage did, beside what the plan predicted."""

    index: int
    trials: int
    time_s: float
    cost_usd: float
    predicted_time_s: float
    predicted_cost_usd: float
    peak_functions: int
    """Most functions running at once (never above the platform's concurrency limit)."""


@dataclass(frozen=True)
class TuneSimulation:
    """A simulated run of a TunePlan: real-vs-predicted time and cost, stage by stage."""

    plan: TunePlan
    stages: tuple[SimulatedStage, ...]
    time_s: float
    cost_usd: float
    seed: int
    noise: float
    cold_start_noise: float

    @property
    def time_error(self) -> float:
        """(simulated − predicted) / predicted time."""
        return (self.time_s - self.plan.time_s) / self.plan.time_s

    @property
    def cost_error(self) -> float:
        return (self.cost_usd - self.plan.cost_usd) / self.plan.cost_usd

    @property
    def within_constraint(self) -> bool:
        return self.plan.constraint.admits(self.time_s, self.cost_usd)


def _lognormal(rng: np.random.Generator, cv: float, shape: tuple[int, ...]) -> np.ndarray:
    """Mean-one multipliers with coefficient of variation ``cv`` (all ones when cv = 0)."""
    if cv == 0:
        return np.ones(shape)
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.lognormal(-sigma * sigma / 2, sigma, size=shape)


def _check(name: str, value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"the value of {name} is {value}, but must be a finite number >= 0")
    return value


class _StageRun:
    """The trials of one stage queued for function slots on the event loop."""

    def __init__(
        self,
        loop: EventLoop,
        stage: StagePlan,
        catalog: Catalog,
        durations: np.ndarray,
        costs: np.ndarray,
        on_done: Callable[[_StageRun], None],
    ) -> None:
        self.loop, self.stage, self.on_done = loop, stage, on_done
        memory = stage.allocation.memory_mb
        self.free = int(catalog.platform.max_concurrent(memory))
        if stage.allocation.n > self.free:
            raise ConfigError(
                f"stage {stage.index} needs {stage.allocation.n} functions of {memory} MB per "
                f"trial, but {catalog.name} runs at most {self.free} at once"
            )
        self.queue = deque(range(stage.trials))
        self.durations, self.costs = durations, costs
        self.started_at = loop.now
        self.running = 0
        self.peak = 0
        self.spent = 0.0

    def start(self) -> None:
        n = self.stage.allocation.n
        while self.queue and self.free >= n:
            trial = self.queue.popleft()
            self.free -= n
            self.running += 1
            self.peak = max(self.peak, self.running * n)
            self.loop.after(float(self.durations[trial]), partial(self._finish, trial))

    def _finish(self, trial: int) -> None:
        self.free += self.stage.allocation.n
        self.running -= 1
        self.spent += float(self.costs[trial])
        if self.queue:
            self.start()
        elif self.running == 0:
            self.on_done(self)


class _Simulation:
    def __init__(self, plan: TunePlan, catalog: Catalog, noise: float, cold: float, seed: int):
        self.plan, self.catalog = plan, catalog
        self.noise, self.cold = noise, cold
        self.rng = np.random.default_rng(seed)
        self.loop = EventLoop()
        self.results: list[SimulatedStage] = []
        self.next_stage = 0

    def run(self) -> list[SimulatedStage]:
        self.loop.after(0.0, self.start_next)
        self.loop.run()
        return self.results

    def start_next(self) -> None:
        if self.next_stage >= len(self.plan.stages):
            return
        stage = self.plan.stages[self.next_stage]
        self.next_stage += 1
        durations, costs = self._draw(stage)
        _StageRun(self.loop, stage, self.catalog, durations, costs, self.finished).start()

    def _draw(self, stage: StagePlan) -> tuple[np.ndarray, np.ndarray]:
        """Duration and bill of every trial of the stage (vectorised draws, in a fixed order)."""
        platform = self.catalog.platform
        epochs = _lognormal(self.rng, self.noise, (stage.trials, stage.epochs))
        cold = _lognormal(self.rng, self.cold, (stage.trials,))
        epoch = stage.epoch
        allocation = stage.allocation
        # Trials start in order; those after the first wave reuse its warm functions.
        slots = int(platform.max_concurrent(allocation.memory_mb))
        per_wave = max(1, slots // allocation.n)
        cold = np.where(np.arange(stage.trials) < per_wave, cold, 0.0)
        # Each trial runs at the contention of the wave it starts in (the stage model's rule):
        # its start and epochs take κ times as long and its functions bill κ times as much.
        demand = np.array([allocation.n * float(platform.vcpus(allocation.memory_mb))])
        slower = trial_contentions(platform, demand, np.array([per_wave]), stage.trials)[0]
        start_s = float(platform.cold_start_time(allocation.memory_mb))
        durations = (cold * start_s + epochs.sum(axis=1) * epoch.time_s) * slower
        time_priced = self.catalog.storage(allocation.storage).billed_by_time
        # GB-seconds (and node time) scale with the time the functions really ran.
        scaled = epoch.function_usd * slower + (epoch.storage_usd if time_priced else 0.0)
        fixed = epoch.invocation_usd + (0.0 if time_priced else epoch.storage_usd)
        start_usd = float(startup_cost(platform, allocation.n, allocation.memory_mb))
        costs = epochs.sum(axis=1) * scaled + stage.epochs * fixed + cold * start_usd * slower
        return durations, costs

    def finished(self, run: _StageRun) -> None:
        stage = run.stage
        self.results.append(
            SimulatedStage(
                index=stage.index,
                trials=stage.trials,
                time_s=self.loop.now - run.started_at,
                cost_usd=run.spent,
                predicted_time_s=stage.time_s,
                predicted_cost_usd=stage.cost_usd,
                peak_functions=run.peak,
            )
        )
        self.start_next()


def simulate_tuning(
    plan: TunePlan,
    catalog: Catalog,
    *,
    noise: float = 0.1,
    cold_start_noise: float = 0.3,
    seed: int = 0,
) -> TuneSimulation:
    """Run ``plan`` on a simulated ``catalog`` platform and report real-vs-predicted figures.

    ``noise`` is the coefficient of variation of each epoch's time, ``cold_start_noise`` that
    of each cold start; the same seed gives the same run.
    """
    _check("noise", noise)
    _check("cold_start_noise", cold_start_noise)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"the value of seed is {seed!r}, but must be an integer >= 0")
    stages = _Simulation(plan, catalog, noise, cold_start_noise, seed).run()
    return TuneSimulation(
        plan=plan,
        stages=tuple(stages),
        time_s=sum(s.time_s for s in stages),
        cost_usd=sum(s.cost_usd for s in stages),
        seed=seed,
        noise=noise,
        cold_start_noise=cold_start_noise,
    )
