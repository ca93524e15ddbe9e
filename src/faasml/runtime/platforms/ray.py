"""The Ray platform: function instances as Ray actors on a Ray cluster (MISSION C7, C8).

Each function instance is a Ray actor scheduled with fractional CPUs = memory / mb_per_vcpu
(1769 MB per vCPU, as AWS Lambda) and the memory size as Ray's ``memory`` resource; each
invocation is one task on that actor. Inside the actor the function runs in the local
platform's instance process (``LocalPlatform`` with one instance), so the memory cap
(RLIMIT_AS + resident-memory watch), the CPU share, the maximum duration, cancellation and
crash reporting are the local platform's, applied on the node that runs the function. Idle
actors stay warm and are reused by invocations of the same size (warm starts); a new actor is
a cold start, billed from the actor's start when the catalog bills cold starts.

Connect to a running cluster with ``address`` (``"auto"``, ``"ray://host:10001"`` or the
head's ``host:6379``); with no address and no Ray session in this process a local one is
started and stopped on ``close``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from faasml._imports import optional_import
from faasml._ray_config import LOCAL_SYSTEM_CONFIG, check_reachable
from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms import _common
from faasml.runtime.platforms.contract import (
    Billed,
    CapacityError,
    Enforcement,
    FunctionError,
    FunctionRef,
    Invocation,
)
from faasml.runtime.platforms.local import IDLE_TIMEOUT_S, LocalPlatform

START_TIMEOUT_S = 60.0
"""An actor Ray has not placed and started by then is killed (its cluster is fragmented or
full); its invocation fails as ``killed``."""


AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
"""Ray's logger that says, on every new local instance, that token authentication is on and
how to opt out: a line on the user's console about Ray's defaults, not about the run."""


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Only errors from the logger ``name`` while the block runs."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class _FunctionHost:
    """The actor body: one function instance, run by the local platform on this node.

    Threaded (max_concurrency=2) so ``cancel`` reaches a running ``run``.
    """

    def __init__(self, catalog: Catalog, memory_mb: int, options: dict[str, Any]) -> None:
        self.started_wall = time.time()
        self.memory_mb = memory_mb
        # One instance per actor: a template would import the runtime as a process start does,
        # and leave that import out of the function's measured cold start.
        self.platform = LocalPlatform(catalog, **{"start": "process", **options})
        self._lock = threading.Lock()
        self._current: tuple[int, Invocation] | None = None
        self._cancelled: set[int] = set()

    def run(self, call: int, ref: str, payload: Any, timeout_s: float | None) -> dict[str, Any]:
        """Run ``ref(payload)`` as call number ``call``; returns the outcome and the inner
        bill as plain data."""
        with self._lock:
            invocation = self.platform.invoke(ref, payload, self.memory_mb, timeout_s)
            self._current = (call, invocation)
            if call in self._cancelled:  # the cancel arrived before the call started
                invocation.cancel()
        outcome: dict[str, Any]
        try:
            outcome = {"ok": True, "value": invocation.result()}
        except FunctionError as err:
            outcome = {"ok": False, "kind": err.kind, "message": str(err), "detail": err.detail}
        finally:
            with self._lock:
                self._current = None
        billed = invocation.billed
        if billed is None:  # pragma: no cover - set before result() returns
            raise RuntimeError("the local invocation ended without a bill")
        outcome.update(
            duration_s=billed.duration_s,
            cold=billed.cold,
            init_s=billed.init_s,
            started_wall=self.started_wall,
            cpu=self.platform.enforcement.cpu,
        )
        return outcome

    def cancel(self, call: int) -> None:
        """Cancel call number ``call``, now or as soon as it starts."""
        with self._lock:
            self._cancelled.add(call)
            if self._current is not None and self._current[0] == call:
                self._current[1].cancel()

    def warm(self) -> int:
        """Start the instance process now (a prewarmed instance)."""
        return self.platform.prewarm(self.memory_mb, 1)

    def close(self) -> None:
        self.platform.close()


@dataclass(eq=False)
class _Actor:
    handle: Any
    memory_mb: int
    vcpus: float
    created_wall: float
    fresh: bool = True
    """No invocation has run on it yet (its start is still to be billed)."""
    busy: RayInvocation | None = None
    idle_since: float = 0.0
    ready: Any = None
    """Future of the actor's creation (done once Ray has placed and started it)."""
    unplaced: bool = False
    """Killed because Ray could not place it within ``start_timeout_s``."""
    retired: bool = False
    """Its invocation was cancelled, which stopped its instance (as on the local platform):
    never reused warm, killed at the next invoke."""


class RayInvocation(_common.SettledInvocation):
    """One task on a function actor; completed by the object ref's future callback."""

    def __init__(self, platform: RayPlatform, actor: _Actor, dispatched: float, call: int) -> None:
        super().__init__(actor.memory_mb, dispatched)
        self.platform = platform
        self.actor = actor
        self.call = call
        self._cancel_sent = False

    def cancel(self) -> None:
        if self.done() or self._cancel_sent:
            return
        self._cancel_sent = True
        if self.actor.ready is not None and not self.actor.ready.done():
            self.platform._kill(self.actor)  # not started yet: nothing to stop inside
            return
        with contextlib.suppress(Exception):
            self.actor.handle.cancel.remote(self.call)

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_sent


class RayPlatform(_common.PooledPlatform):
    """Function instances as Ray actors with CPUs = memory / mb_per_vcpu and a memory resource."""

    name = "ray"
    speed_drifts = True  # a Ray cluster's nodes run other work too

    def __init__(
        self,
        catalog: Catalog,
        *,
        address: str | None = None,
        cpu: str = "auto",
        preload: tuple[str, ...] = (),
        memory_check: bool = True,
        address_space_limit: bool = True,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        spread: bool = True,
        start_timeout_s: float = START_TIMEOUT_S,
        gpus_per_function: float = 0.0,
    ) -> None:
        """``gpus_per_function``: GPUs Ray reserves for each function (0: none), so that a
        training loop's ``ctx.device`` is a GPU there; the catalog's price is not changed."""
        super().__init__(catalog)
        _common.check_cpu_mode(cpu)
        self._ray = optional_import("ray", "ray")
        self.idle_timeout_s = idle_timeout_s
        self._options: dict[str, Any] = {
            "cpu": cpu,
            "preload": tuple(preload),
            "memory_check": memory_check,
            "address_space_limit": address_space_limit,
            "idle_timeout_s": idle_timeout_s,
        }
        self._spread = spread
        if start_timeout_s <= 0:
            raise ConfigError(f"the value of start_timeout_s is {start_timeout_s}, but must be > 0")
        self.start_timeout_s = start_timeout_s
        if not gpus_per_function >= 0:
            raise ConfigError(
                f"the value of gpus_per_function is {gpus_per_function}, but must be >= 0"
            )
        self.gpus_per_function = float(gpus_per_function)
        self._owns_session = False
        if not self._ray.is_initialized():
            if address:
                check_reachable(address)  # ray.init retries a dead address for minutes
            try:
                # A new local instance runs its workers at the caller's priority; a running
                # cluster (an address, or RAY_ADDRESS) keeps its own: Ray refuses them there.
                new_local = address is None and not os.environ.get("RAY_ADDRESS")
                local = {"_system_config": LOCAL_SYSTEM_CONFIG} if new_local else {}
                with _quiet(AUTH_LOGGER):
                    self._ray.init(
                        address=address,
                        include_dashboard=False,
                        log_to_driver=False,
                        configure_logging=False,
                        **local,
                    )
            except (ConnectionError, RuntimeError, ValueError) as err:
                where = address or "a new local Ray instance"
                raise ConfigError(f"cannot connect to the Ray cluster at {where}: {err}") from err
            self._owns_session = True
        self._check_gpus()
        self._host_class = self._ray.remote(_FunctionHost)
        # self._lock (PooledPlatform) serialises invoke/prewarm/close (held across Ray calls).
        self._state = threading.Lock()
        """Guards the actor list and counters (never held across a Ray call)."""
        self._actors: list[_Actor] = []
        self._calls = 0
        self._cpu_seen: str | None = None

    def _check_gpus(self) -> None:
        """ConfigError in one line when functions ask for more GPUs than any node has."""
        if self.gpus_per_function <= 0:
            return
        nodes = [n for n in self._ray.nodes() if n.get("Alive")]
        most = max((float(n.get("Resources", {}).get("GPU", 0.0)) for n in nodes), default=0.0)
        if most < self.gpus_per_function:
            raise ConfigError(
                f"gpus_per_function is {self.gpus_per_function:g}, but the Ray cluster's "
                f"nodes have at most {most:g} GPUs each"
            )

    def _gpus_said(self) -> str:
        return f", {self.gpus_per_function:g} GPUs" if self.gpus_per_function > 0 else ""

    # ----------------------------------------------------------------- contract

    @property
    def enforcement(self) -> Enforcement:
        memory = _common.memory_enforcement(
            self._options["address_space_limit"], self._options["memory_check"]
        )
        cpu = self._cpu_seen or ("none" if self._options["cpu"] == "none" else "duty-cycle")
        return Enforcement(memory=memory, cpu=cpu, duration="kill")

    def invoke(
        self, fn: FunctionRef, payload: Any, memory_mb: int, timeout_s: float | None = None
    ) -> Invocation:
        ref, limit = _common.invocation_args(self.platform, fn, memory_mb, timeout_s)
        with self._open():
            self._reap_idle()
            actor = self._take_warm(memory_mb) or self._start_actor(memory_mb)
            self._calls += 1
            invocation = RayInvocation(self, actor, time.monotonic(), self._calls)
            actor.busy = invocation
            cold_actor = actor.fresh
            actor.fresh = False
            future = actor.handle.run.remote(invocation.call, ref, payload, limit).future()
        future.add_done_callback(lambda done: self._on_done(invocation, cold_actor, done))
        return invocation

    def prewarm(self, memory_mb: int, count: int) -> int:
        """Start ``count`` idle actors of ``memory_mb`` with their instance process running."""
        _common.check_memory(self.platform, memory_mb)
        started = []
        with self._lock:
            for _ in range(count):
                try:
                    actor = self._start_actor(memory_mb)
                except CapacityError:
                    break
                actor.idle_since = time.monotonic()
                started.append(actor)
        for actor in started:
            actor.handle.warm.remote()
        return len(started)

    def close(self) -> None:
        with self._lock, self._state:
            if self._closed:
                return
            self._closed = True
            actors, self._actors = self._actors, []
        for actor in actors:
            if actor.busy is not None:
                actor.busy._fail("cancelled", "platform closed", cold=False)
            with contextlib.suppress(Exception):
                self._ray.kill(actor.handle)
        if self._owns_session:
            self._ray.shutdown()

    # ----------------------------------------------------------------- actors

    def _take_warm(self, memory_mb: int) -> _Actor | None:
        for actor in self._actors:
            if actor.busy is None and not actor.retired and actor.memory_mb == memory_mb:
                return actor
        return None

    def _reap_idle(self) -> None:
        now = time.monotonic()
        for actor in list(self._actors):
            idle_long = now - actor.idle_since > self.idle_timeout_s
            if actor.busy is None and (actor.retired or idle_long):
                self._discard(actor)

    def _forget(self, actor: _Actor) -> None:
        with self._state:
            if actor in self._actors:
                self._actors.remove(actor)

    def _discard(self, actor: _Actor) -> None:
        """Forget and kill an actor (from a caller's or a timer's thread, never from a Ray
        callback: a Ray call made on Ray's own event thread waits on that thread)."""
        self._forget(actor)
        with contextlib.suppress(Exception):
            self._ray.kill(actor.handle)

    _kill = _discard

    def _check_started(self, actor: _Actor) -> None:
        if actor.ready is not None and not actor.ready.done():
            actor.unplaced = True
            self._kill(actor)

    def _start_actor(self, memory_mb: int) -> _Actor:
        """A new function actor; evicts idle ones or raises CapacityError when it cannot fit."""
        vcpus = self.vcpus(memory_mb)
        for other in [a for a in self._actors if a.busy is None and a.memory_mb != memory_mb]:
            self._discard(other)  # recycled: idle fractions would fragment the nodes' CPUs
        while not self._fits(memory_mb, vcpus):
            idle = [a for a in self._actors if a.busy is None]
            if not idle:
                raise CapacityError(
                    f"the Ray cluster is full: {len(self._actors)} functions are running and "
                    f"one more of {memory_mb} MB ({vcpus:.3f} CPUs{self._gpus_said()}) does not "
                    "fit its resources "
                    f"or the concurrency limit of {self.platform.concurrency_limit}"
                )
            self._discard(min(idle, key=lambda a: a.idle_since))
        options: dict[str, Any] = {
            "num_cpus": vcpus,
            "memory": memory_mb * 2**20,
            "max_concurrency": 2,
            "max_restarts": 0,
        }
        if self.gpus_per_function > 0:
            options["num_gpus"] = self.gpus_per_function
        if self._spread:
            options["scheduling_strategy"] = "SPREAD"
        handle = self._host_class.options(**options).remote(self.catalog, memory_mb, self._options)
        actor = _Actor(handle, memory_mb, vcpus, time.time())
        actor.ready = handle.__ray_ready__.remote().future()
        watch = threading.Timer(self.start_timeout_s, self._check_started, (actor,))
        watch.daemon = True
        watch.start()
        with self._state:
            self._actors.append(actor)
        return actor

    def _fits(self, memory_mb: int, vcpus: float) -> bool:
        if len(self._actors) + 1 > self.platform.concurrency_limit:
            return False
        total = self._ray.cluster_resources()
        used_cpus = sum(a.vcpus for a in self._actors) + vcpus
        used_bytes = (sum(a.memory_mb for a in self._actors) + memory_mb) * 2**20
        used_gpus = (len(self._actors) + 1) * self.gpus_per_function
        return bool(
            used_cpus <= float(total.get("CPU", 0.0)) + 1e-9
            and used_bytes <= float(total.get("memory", float("inf")))
            and (used_gpus == 0 or used_gpus <= float(total.get("GPU", 0.0)) + 1e-9)
        )

    # ----------------------------------------------------------------- completion

    def _on_done(self, invocation: RayInvocation, cold_actor: bool, done: Any) -> None:
        actor = invocation.actor
        try:
            outcome: dict[str, Any] = done.result()
        except Exception as err:  # the actor died (node lost, killed) or the task failed
            self._forget(actor)  # no Ray call on Ray's callback thread
            kind = "cancelled" if self._closed or invocation.cancel_requested else "killed"
            message = f"the Ray actor ended: {err}"
            if actor.unplaced:
                message = f"Ray could not place the function within {self.start_timeout_s:g} s"
            invocation._fail(kind, message, cold=cold_actor)
            return
        self._cpu_seen = str(outcome["cpu"])
        actor_init = max(0.0, float(outcome["started_wall"]) - actor.created_wall)
        cold = cold_actor or bool(outcome["cold"])
        init_s = float(outcome["init_s"]) + (actor_init if cold_actor else 0.0)
        extra = actor_init if cold_actor and self.platform.bills_cold_start else 0.0
        error = None
        if not outcome["ok"]:
            kind = str(outcome["kind"])
            message = str(outcome["message"]).removeprefix(f"function {kind}: ")
            error = FunctionError(kind, message, str(outcome["detail"]))
        billed = Billed(
            float(outcome["duration_s"]) + extra, actor.memory_mb, cold, init_s, error is None
        )
        with self._state:  # never self._lock here: it is held across Ray calls
            actor.busy = None
            actor.idle_since = time.monotonic()
            actor.retired = error is not None and error.kind == "cancelled"
            if cold:
                self._cold_starts += 1
        invocation._finish(outcome.get("value"), error, billed)
