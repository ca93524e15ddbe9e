"""A tiny discrete-event core (after SimPy): events ordered by (time, priority, sequence).

Ties are broken by priority, then by the order events were scheduled, so a run is
deterministic. The same loop runs on a virtual clock (jumps to the next event) or on the
wall clock (sleeps until it), so simulated and real drivers share their logic.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    """Where the loop's time comes from."""

    def now(self) -> float: ...

    def advance_to(self, when: float) -> None: ...


class VirtualClock:
    """Simulated time: advancing is instant."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, when: float) -> None:
        self._now = max(self._now, when)


class WallClock:
    """Real time in seconds since the clock was made; advancing sleeps."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin

    def advance_to(self, when: float) -> None:
        delay = when - self.now()
        if delay > 0:
            time.sleep(delay)


@dataclass(order=True)
class Event:
    """A callback due at ``time``; lower ``priority`` runs first among equal times."""

    time: float
    priority: int
    sequence: int
    action: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class EventLoop:
    """Schedules callbacks and runs them in (time, priority, sequence) order."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or VirtualClock()
        self._queue: list[Event] = []
        self._sequence = itertools.count()

    @property
    def now(self) -> float:
        return self.clock.now()

    def at(self, when: float, action: Callable[[], None], *, priority: int = 0) -> Event:
        """Run ``action`` at absolute time ``when`` (not before now)."""
        if when < self.now:
            raise ValueError(f"cannot schedule at {when}, before now ({self.now})")
        event = Event(when, priority, next(self._sequence), action)
        heapq.heappush(self._queue, event)
        return event

    def after(self, delay: float, action: Callable[[], None], *, priority: int = 0) -> Event:
        """Run ``action`` ``delay`` seconds from now."""
        if delay < 0:
            raise ValueError(f"the value of delay is {delay}, but must be >= 0")
        return self.at(self.now + delay, action, priority=priority)

    def pending(self) -> int:
        return sum(1 for event in self._queue if not event.cancelled)

    def step(self) -> bool:
        """Run the next event; False when none is left."""
        while self._queue:
            event = heapq.heappop(self._queue)
            if event.cancelled:
                continue
            self.clock.advance_to(event.time)
            event.action()
            return True
        return False

    def run(self, until: float | None = None) -> float:
        """Run events until none is left or the next is after ``until``; returns the time."""
        while self._queue:
            head = self._queue[0]
            if head.cancelled:
                heapq.heappop(self._queue)
                continue
            if until is not None and head.time > until:
                self.clock.advance_to(until)
                break
            self.step()
        return self.now
