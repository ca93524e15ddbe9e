from __future__ import annotations

import pytest

from faasml.sim import EventLoop, WallClock


def test_events_run_in_time_then_priority_then_schedule_order() -> None:
    loop = EventLoop()
    seen: list[str] = []
    loop.at(2.0, lambda: seen.append("late"))
    loop.at(1.0, lambda: seen.append("b"), priority=1)
    loop.at(1.0, lambda: seen.append("a"), priority=0)
    loop.at(1.0, lambda: seen.append("c"), priority=1)
    assert loop.run() == 2.0
    assert seen == ["a", "b", "c", "late"]


def test_run_until_stops_before_later_events_and_cancel_skips() -> None:
    loop = EventLoop()
    seen: list[float] = []
    loop.after(1.0, lambda: seen.append(loop.now))
    skipped = loop.after(2.0, lambda: seen.append(-1.0))
    loop.after(5.0, lambda: seen.append(loop.now))
    skipped.cancel()
    assert loop.run(until=3.0) == 3.0
    assert seen == [1.0]
    assert loop.pending() == 1
    loop.run()
    assert seen == [1.0, 5.0]


def test_events_scheduled_by_events_and_past_times_refused() -> None:
    loop = EventLoop()
    seen: list[float] = []

    def tick() -> None:
        seen.append(loop.now)
        if loop.now < 3:
            loop.after(1.0, tick)

    loop.at(0.0, tick)
    loop.run()
    assert seen == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="before now"):
        loop.at(1.0, tick)
    with pytest.raises(ValueError, match="delay"):
        loop.after(-1.0, tick)


def test_wall_clock_waits_for_real_time() -> None:
    loop = EventLoop(WallClock())
    seen: list[float] = []
    loop.after(0.05, lambda: seen.append(loop.now))
    loop.run()
    assert seen and seen[0] >= 0.05
