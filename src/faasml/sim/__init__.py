"""Discrete-event simulation shared by every simulator of faasml (virtual or wall clock)."""

from faasml.sim.engine import Event, EventLoop, VirtualClock, WallClock
from faasml.sim.tuning import SimulatedStage, TuneSimulation, simulate_tuning

__all__ = ["Event", "EventLoop", "VirtualClock", "WallClock"]
__all__ += ["SimulatedStage", "TuneSimulation", "simulate_tuning"]
