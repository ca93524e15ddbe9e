"""The simulated platform keeps the Platform contract (the conformance suite, run with models
of the suite's functions) and its time is virtual: waiting moves its clock, not the machine's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms.contract import CapacityError, FunctionError, Platform
from faasml.sim.platform import SimClock, SimOutcome, SimulatedPlatform
from faasml.testing.platform_conformance import *  # noqa: F403

FN = "faasml.testing.functions"


def _echo(payload: Any, memory_mb: int, instance: int) -> SimOutcome:
    return SimOutcome(0.01, payload)


def _pid(payload: Any, memory_mb: int, instance: int) -> SimOutcome:
    return SimOutcome(0.01, instance)  # the instance stands for its process


def _fail(payload: Any, memory_mb: int, instance: int) -> SimOutcome:
    return SimOutcome(0.01, failure="error", message=f"RuntimeError: {payload}")


def _sleep(payload: Any, memory_mb: int, instance: int) -> SimOutcome:
    return SimOutcome(float(payload), payload)


def _allocate(payload: Any, memory_mb: int, instance: int) -> SimOutcome:
    if payload > memory_mb:
        return SimOutcome(0.1, failure="out-of-memory", message=f"{payload} MB > {memory_mb} MB")
    return SimOutcome(0.1, payload)


def _exit(payload: Any, memory_mb: int, instance: int) -> SimOutcome:
    return SimOutcome(0.0, failure="killed", message=f"exit code {payload}")


MODELS = {
    f"{FN}:echo": _echo,
    f"{FN}:pid": _pid,
    f"{FN}:fail": _fail,
    f"{FN}:sleep": _sleep,
    f"{FN}:allocate": _allocate,
    f"{FN}:exit_process": _exit,
}


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    opened = SimulatedPlatform(load_catalog("local"), MODELS)
    yield opened
    opened.close()


def test_waiting_moves_the_virtual_clock() -> None:
    catalog = load_catalog("local")
    sim = SimulatedPlatform(catalog, MODELS, cold_start_noise=0.0)
    invocation = sim.invoke(f"{FN}:sleep", 600.0, 512)
    assert not invocation.done() and invocation.billed is None
    with pytest.raises(TimeoutError):
        invocation.result(timeout=60)
    assert sim.clock.monotonic() == pytest.approx(60.0)
    assert invocation.result() == 600.0
    cold = float(catalog.platform.cold_start_time(512))
    assert sim.clock.monotonic() == pytest.approx(600.0 + cold)
    billed = invocation.billed
    assert billed is not None and billed.cold and billed.init_s == pytest.approx(cold)


def test_a_sleep_moves_on_to_the_next_end_but_not_far_past_what_it_asked() -> None:
    clock = SimClock(step_s=0.5)
    clock.expect(10.0)
    clock.sleep(0.01)
    assert clock.monotonic() == pytest.approx(0.51)  # the end is far: one step at most
    clock.expect(0.7)
    clock.sleep(0.01)
    assert clock.monotonic() == pytest.approx(0.7)  # on to the end, the poll finds it
    clock.sleep(0.01)
    assert clock.monotonic() == pytest.approx(1.21)


def test_concurrency_limit_refuses_more_functions() -> None:
    catalog = load_catalog("local").with_concurrency(2)
    sim = SimulatedPlatform(catalog, MODELS)
    first = sim.invoke(f"{FN}:sleep", 5.0, 512)
    sim.invoke(f"{FN}:sleep", 5.0, 512)
    with pytest.raises(CapacityError):
        sim.invoke(f"{FN}:echo", 1, 512)
    first.result()
    assert sim.invoke(f"{FN}:echo", 1, 512).result() == 1  # warm: the first's instance
    assert sim.cold_starts == 2


def test_prewarmed_instances_serve_without_a_cold_start() -> None:
    sim = SimulatedPlatform(load_catalog("local"), MODELS, cold_start_noise=0.0)
    assert sim.prewarm(1024, 2) == 2
    bills = sim.take_standalone_bills()
    assert len(bills) == 2 and all(b.cold for b in bills)
    invocation = sim.invoke(f"{FN}:echo", "x", 1024)
    assert invocation.result() == "x"
    assert invocation.billed is not None and not invocation.billed.cold
    assert sim.warm_instances() == {1024: 2}


def test_a_function_without_a_model_is_refused() -> None:
    sim = SimulatedPlatform(load_catalog("local"), MODELS)
    with pytest.raises(ConfigError, match=r"no model of faasml\.testing\.functions:spin"):
        sim.invoke(f"{FN}:spin", 1.0, 512)


def test_a_failure_is_delivered_once_and_billed() -> None:
    sim = SimulatedPlatform(load_catalog("local"), MODELS)
    invocation = sim.invoke(f"{FN}:allocate", 4096, 512)
    for _ in range(2):
        with pytest.raises(FunctionError, match="out-of-memory"):
            invocation.result()
    assert invocation.billed is not None and not invocation.billed.ok
