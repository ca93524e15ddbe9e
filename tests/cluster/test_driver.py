"""The cluster driver with its parts injected (what a real run plugs in): the clock, the
executor's ``place`` and the services' ``Serving``. Fakes here stand for time and workers
only; the policy, loans and restart accounting are the real ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faasml.cluster import AppModel, Cluster, Job, SimConfig, Simulator, make_policy
from faasml.cluster.executor import JobState, SimulatedExecutor
from faasml.cluster.inference import InferenceService, RateTrace
from faasml.sim import VirtualClock


class LateClock(VirtualClock):
    """A clock that reaches every time asked ``late`` seconds after it (a busy wall clock's
    round starts late); records the times it was asked for."""

    def __init__(self, late: float) -> None:
        super().__init__()
        self.late = late
        self.asked: list[float] = []

    def advance_to(self, when: float) -> None:
        if when > self.now():
            self.asked.append(when)
            super().advance_to(when + self.late)


class PlacingExecutor(SimulatedExecutor):
    """The simulated executor that records what the driver told it to place."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster, adaptive=False)
        self.placed: list[tuple[str, tuple[int, ...], float]] = []

    def place(self, state: JobState, now: float) -> None:
        self.placed.append((state.job.name, state.placement, now))


def test_rounds_follow_the_injected_clock_and_moves_reach_the_executor(
    models: dict[str, AppModel],
) -> None:
    cluster = Cluster.uniform(2, 2)
    jobs = [
        Job("a", "cifar10", 0.0, 2, 128, epochs=1),
        Job("b", "cifar10", 100.0, 4, 128, epochs=1),
    ]
    clock = LateClock(late=7.0)
    executor = PlacingExecutor(cluster)
    config = SimConfig(round_s=60.0, restart_s=0.0)
    driver = Simulator(
        jobs, models, cluster, make_policy("fifo", 60.0), config, (), executor, clock=clock
    )
    result = driver.run()
    starts = [t for t, _ in result.utilization]
    # Each round is asked for one round after the one before really began, and begins late.
    assert starts[0] == 0.0 and len(starts) > 3
    assert np.allclose(np.diff(starts), 67.0)
    # Every placement the policy changed reached the executor, at the round it was made.
    assert executor.placed[0] == ("a", (0, 0), 0.0)
    assert all(now in starts for _, _, now in executor.placed)
    placed_b = [p for name, p, _ in executor.placed if name == "b"]
    assert placed_b and placed_b[0] != ()
    records = {r.name: r for r in result.jobs}
    assert records["b"].start_s is not None and records["b"].start_s >= 100.0
    assert all(r.completion_s is not None for r in result.jobs)


def test_a_job_arriving_after_the_last_round_is_not_waited_for(
    models: dict[str, AppModel],
) -> None:
    """On a wall clock, waiting for an arrival after the run's end would stall the run."""
    cluster = Cluster.uniform(1, 2)
    jobs = [Job("a", "cifar10", 0.0, 1, 128), Job("late", "cifar10", 50_000.0, 1, 128)]
    clock = LateClock(late=0.0)
    config = SimConfig(round_s=60.0, max_time_s=600.0)
    result = Simulator(jobs, models, cluster, make_policy("fifo", 60.0), config, clock=clock).run()
    assert max(clock.asked) <= 600.0
    assert {r.name: r.start_s for r in result.jobs}["late"] is None


class FixedServing:
    """Serving that provisions each service for a fixed rate and records its assignments."""

    def __init__(self, rates: Sequence[float]) -> None:
        self.fixed = list(rates)
        self.asked: list[float] = []
        self.assigned: list[tuple[list[int], frozenset[int], float]] = []

    def rates(self, now: float) -> list[float]:
        self.asked.append(now)
        return self.fixed

    def assign(self, gpus: Sequence[int], servers: frozenset[int], now: float) -> None:
        self.assigned.append((list(gpus), servers, now))


def test_the_services_are_sized_by_the_injected_serving(models: dict[str, AppModel]) -> None:
    """The pool sizes each service for the rate its Serving gives (not the trace's) and
    hands the Serving the GPUs and inference servers; training gets the rest."""
    trace = RateTrace(np.array([0.0, 10_000.0]), np.array([5.0, 5.0]))
    service = InferenceService("web", trace, capacity_rps=10.0, slo_ms=100.0, max_scale=8)
    serving = FixedServing([35.0])  # 4 workers of 10 requests/s: 2 servers of 2 GPUs
    cluster = Cluster.uniform(4, 2)
    jobs = [Job("a", "cifar10", 0.0, 4, 128, epochs=1)]
    config = SimConfig(round_s=60.0, max_time_s=600.0, loaning="fapes")
    driver = Simulator(
        jobs, models, cluster, make_policy("fifo", 60.0), config, [service], serving=serving
    )
    result = driver.run()
    starts = [t for t, _ in result.utilization]
    assert serving.asked == starts
    assert all(gpus == [4] and len(servers) == 2 for gpus, servers, _ in serving.assigned)
    # Inference holds 4 of the 8 GPUs every round: the trace's load reserves one server,
    # the Serving's rate takes a second one back from training at the first round.
    assert all(u >= 0.5 for _, u in result.utilization)
    assert result.loans is not None
    assert result.loans["inference_reserve_servers"] == 1
    assert result.loans["servers_reclaimed"] == 1
