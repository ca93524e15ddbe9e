"""What the proxy's parts share: a cache node's slot, a mapping-table entry, the stats, and
what it needs of the function platform its nodes run on (given by whoever starts it)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

NODE_FUNCTION = "faasml.sync.stores.infinicache.node:serve"
START_TIMEOUT_S = 120.0
"""Longest wait for a node invocation to connect (a cold start under a small CPU share)."""
SETTLE_TIMEOUT_S = 300.0
"""Longest wait for let-go node invocations to end and be billed (``settle``)."""
END_MARGIN = 0.1
"""A node returns when this fraction of its time limit is left."""


class NodeBill(Protocol):
    """What an ended node invocation is billed for."""

    @property
    def duration_s(self) -> float: ...

    @property
    def memory_mb(self) -> int: ...


class NodeInvocation(Protocol):
    """A running or ended node invocation (``faasml.runtime.platforms.contract.Invocation``)."""

    def result(self, timeout: float | None = None) -> Any: ...

    def done(self) -> bool: ...

    def cancel(self) -> None: ...

    @property
    def billed(self) -> NodeBill | None: ...


class NodePlatform(Protocol):
    """Where a node's invocations run (``faasml.runtime.platforms.contract.Platform``); a failed
    invocation's ``result`` raises ``faasml.exceptions.FunctionError``."""

    def invoke(self, fn: str, payload: Any, memory_mb: int) -> NodeInvocation: ...

    def close(self) -> None: ...


OpenPlatform = Callable[..., NodePlatform]
"""``open_platform(name, catalog, **options)``: a platform of kind ``name`` priced by
``catalog`` (``faasml.runtime.platforms.contract.open_platform``)."""


class _NodeDownError(Exception):
    """A node could not be reached for a request."""


@dataclass
class _Object:
    """One entry of the mapping table: where an object's chunks are and how to check them."""

    key: str
    version: str
    size: int
    chunk_size: int
    digest: str
    crcs: list[int]
    placement: list[int]

    def chunk_id(self, index: int) -> str:
        return f"{self.version}/{index}"


@dataclass(eq=False)
class _Slot:
    """One cache node: its platform, its connection while an invocation runs, its chunks."""

    index: int
    platform: NodePlatform
    lock: threading.RLock = field(default_factory=threading.RLock)
    sock: socket.socket | None = None
    release: threading.Event | None = None
    invocation: NodeInvocation | None = None
    ending: NodeInvocation | None = None
    """The invocation last let go, until it has ended (its instance is idle again)."""
    invoked_at: float = 0.0
    last_active: float = 0.0
    instance: str | None = None
    pid: int = 0
    started: float = 0.0
    token: str | None = None
    arrival: tuple[socket.socket, dict[str, Any], threading.Event] | None = None
    chunks: dict[str, tuple[str, str, int, int]] = field(default_factory=dict)
    """chunk id -> (key, version, index, bytes) of what this node holds."""
    used: int = 0


@dataclass
class InfiniCacheStats:
    """What the deployment did: objects lost and repaired, node losses, keep-alives."""

    node_losses: int = 0
    chunks_lost: int = 0
    chunks_repaired: int = 0
    objects_lost: int = 0
    objects_evicted: int = 0
    warmups: int = 0
    backups: int = 0
    repair_errors: int = 0
    invocations: int = 0
    gb_s: float = 0.0
