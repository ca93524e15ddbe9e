"""Plain records of MalleTrain's idle-node scavenging (a leaf module: imports nothing of faasml
but the error base).

An idle-node trace is a list of instants at which the main batch scheduler left nodes idle
or took them back; a job is a data-parallel training job with node bounds, rescale costs and
(for the oracle only) its measured throughput at a few node counts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from faasml.exceptions import ConfigError


class TraceFileError(ConfigError):
    """A trace or jobs file breaks a rule; the message names the file, the line and the rule."""


class EventKind(enum.Enum):
    """The four events that trigger the Resource Allocator (MalleTrain §3.1.2)."""

    NEW_NODES = "new-nodes"
    PREEMPTION = "preemption"
    NEW_JOBS = "new-jobs"
    JOB_COMPLETION = "job-completion"


@dataclass(frozen=True)
class PoolChange:
    """What the main scheduler did at one instant: nodes it left idle, nodes it took back."""

    time_s: float
    added: frozenset[str]
    removed: frozenset[str]


@dataclass(frozen=True)
class IdleTrace:
    """Idle-node events in time order (each instant once); every node starts busy."""

    changes: tuple[PoolChange, ...]
    nodes: frozenset[str]
    source: str = ""

    @property
    def end_s(self) -> float:
        return self.changes[-1].time_s if self.changes else 0.0

    def until(self, end_s: float) -> IdleTrace:
        """The changes strictly before ``end_s``."""
        kept = tuple(c for c in self.changes if c.time_s < end_s)
        return IdleTrace(kept, self.nodes, self.source)


@dataclass(frozen=True)
class ScavengeJob:
    """A malleable training job (the jobs file's row).

    ``nodes``/``samples_per_s`` are its measured throughput (interpolated between points):
    what the oracle is told and what the simulator uses as the truth; the other policies do
    not see them. ``checkpoint_s``: the interval of its periodic checkpoints (a preempted job
    loses the work since the last one); None takes the simulation's default.
    """

    job: str
    model: str
    submit_s: float
    min_nodes: int
    max_nodes: int
    scale_up_s: float
    scale_down_s: float
    total_samples: float
    nodes: tuple[int, ...]
    samples_per_s: tuple[float, ...]
    checkpoint_s: float | None = None
    line: int = field(default=0, compare=False)
