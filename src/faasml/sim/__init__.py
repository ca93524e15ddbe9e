"""Discrete-event simulation shared by every simulator of faasml (virtual or wall clock)."""

from faasml.sim.engine import Event, EventLoop, VirtualClock, WallClock

__all__ = ["Event", "EventLoop", "VirtualClock", "WallClock"]
