"""The embedded local platform: worker processes on this machine that behave like functions.

Each function instance is a real process (``_host``) with a memory size. Its address space is
capped (RLIMIT_AS; ``address_space_limit=False`` leaves only the resident-memory watch, for
frameworks that map more than they use) and its resident memory is watched, so a function
over its size fails as ``out-of-memory``. Its CPU share is memory / mb_per_vcpu, applied by a
cgroup quota when one is writable, else by a duty-cycle throttle, else reported as not
enforced. It is killed at its maximum duration. Idle instances stay warm and are reused by
invocations of the same size; new instances are cold starts, counted: forked from the
platform's template process, which imported the runtime once (``start="template"``, as
snapshot-based FaaS starts a sandbox), or a new Python process importing it
(``start="process"``, and the fallback when the template cannot be used: ``_starts``). The
machine's cores and memory, from the ``local`` catalog, bound how many run at once.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import threading
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms import _common
from faasml.runtime.platforms._common import CPU_MODES as CPU_MODES
from faasml.runtime.platforms._cpu import CgroupCpu, DutyCycle
from faasml.runtime.platforms._instance import Instance, rss_mb
from faasml.runtime.platforms._instance import LocalInvocation as LocalInvocation
from faasml.runtime.platforms._starts import START_MODES, Starter
from faasml.runtime.platforms.contract import (
    Billed,
    CapacityError,
    Enforcement,
    FunctionError,
    FunctionRef,
    Invocation,
)

IDLE_TIMEOUT_S = 120.0
"""A warm instance idle this long is stopped (AWS keeps them minutes)."""
TICK_S = 0.01
"""Longest the monitor sleeps between checks of deadlines and memory."""


class LocalPlatform(_common.PooledPlatform):
    """Worker processes on this machine, priced and bounded by a catalog (usually ``local``)."""

    name = "local"
    speed_drifts = True  # the machine's other work changes what its functions get

    def __init__(
        self,
        catalog: Catalog,
        *,
        cpu: str = "auto",
        preload: tuple[str, ...] = (),
        memory_check: bool = True,
        address_space_limit: bool = True,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        start: str = "template",
    ) -> None:
        super().__init__(catalog)
        _common.check_cpu_mode(cpu)
        if start not in START_MODES:
            raise ConfigError(f"start={start!r}: must be one of {', '.join(START_MODES)}")
        self.preload = preload
        self.memory_check = memory_check
        self.address_space_limit = address_space_limit
        self.idle_timeout_s = idle_timeout_s
        self._cgroup = CgroupCpu.probe() if cpu in ("auto", "cgroup") else None
        if cpu == "cgroup" and self._cgroup is None:
            raise ConfigError("cpu='cgroup' was asked for, but no writable cgroup CPU controller")
        self._cpu_mode = (
            "cgroup"
            if self._cgroup
            else ("duty-cycle" if cpu in ("auto", "duty-cycle") else "none")
        )
        self._starts = Starter(start, preload)
        self._instances: list[Instance] = []
        self._retired: list[Connection] = []
        """Connections of discarded instances: only the monitor closes them, as it may be
        reading one of them at that very moment."""
        self._standalone: list[Billed] = []
        self._wake_r, self._wake_w = Pipe(duplex=False)
        self._monitor = threading.Thread(target=self._watch, name="faasml-local", daemon=True)
        self._monitor.start()

    @property
    def start(self) -> str:
        """How new instances start: ``template`` (forked from it) or ``process``."""
        return self._starts.mode

    @property
    def start_fallback(self) -> str | None:
        """Why instances start as new processes although the template was asked for."""
        return self._starts.fallback

    def ready(self) -> None:
        """Start the template if it is not, and wait until it can fork instances: its start
        (importing the runtime once) is the platform's, not a function's cold start."""
        self._starts.ready(lambda: self._env(self.platform.memory_min_mb))

    # ----------------------------------------------------------------- contract

    @property
    def enforcement(self) -> Enforcement:
        memory = _common.memory_enforcement(self.address_space_limit, self.memory_check)
        return Enforcement(memory=memory, cpu=self._cpu_mode, duration="kill")

    def invoke(
        self, fn: FunctionRef, payload: Any, memory_mb: int, timeout_s: float | None = None
    ) -> Invocation:
        ref, limit = _common.invocation_args(self.platform, fn, memory_mb, timeout_s)
        self.ready()  # the template's own start is not a function's cold start
        with self._open():
            invocation: LocalInvocation | None = None
            instance = self._take_warm(memory_mb)
            if instance is not None:
                # None when it died while idle: a fresh instance takes the invocation.
                invocation = self._dispatch(instance, ref, payload, limit, cold=False)
            if invocation is None:
                # A cold start counts from here: making room (stopping idle instances) and
                # starting the process are part of it, as a provider's sandbox start is.
                requested = time.monotonic()
                self._make_room(memory_mb)
                instance = self._spawn(memory_mb)
                invocation = self._dispatch(
                    instance, ref, payload, limit, cold=True, since=requested
                )
            if invocation is None:
                raise FunctionError("killed", "could not reach a newly started instance")
        self._wake()
        return invocation

    def _dispatch(
        self,
        instance: Instance,
        ref: str,
        payload: Any,
        limit: float,
        *,
        cold: bool,
        since: float | None = None,
    ) -> LocalInvocation | None:
        """Send an invocation to ``instance`` (lock held); None, with the instance discarded,
        when its process can no longer be reached. ``since``: when a cold start began."""
        now = time.monotonic() if since is None else since
        invocation = LocalInvocation(instance.memory_mb, now, now + limit, cold)
        instance.invocation = invocation
        if instance.ready_at is None:
            # Still starting (importing its runtime, not reading its pipe): the monitor sends
            # the message once it is ready, so the caller does not wait out this start (a
            # payload over the pipe's buffer would block it) and a run's cold starts overlap.
            instance.pending.append(("run", ref, payload))
            return invocation
        try:
            instance.conn.send(("run", ref, payload))
        except (OSError, ValueError):
            instance.invocation = None
            self._discard(instance)
            return None
        if instance.ready_at is not None and self._cpu_mode == "duty-cycle":
            instance.throttle = DutyCycle(instance.pid, instance.vcpus, now)
        return invocation

    def warm_instances(self) -> dict[int, int]:
        """Idle instances by memory size, the size idle longest first (its most recent one's
        idle time): the order in which this platform stops them to make room."""
        with self._lock:
            idle = [(i.idle_since, i.memory_mb) for i in self._instances if i.invocation is None]
        latest: dict[int, float] = {}
        for since, memory in idle:
            latest[memory] = max(latest.get(memory, since), since)
        order = sorted(latest, key=lambda memory: latest[memory])
        return {memory: sum(1 for _, m in idle if m == memory) for memory in order}

    def take_standalone_bills(self) -> list[Billed]:
        with self._lock:
            bills, self._standalone = self._standalone, []
        return bills

    def prewarm(self, memory_mb: int, count: int) -> int:
        """Start ``count`` idle instances of ``memory_mb`` now (they count as cold starts)."""
        _common.check_memory(self.platform, memory_mb)
        self.ready()
        started = 0
        with self._lock:
            for _ in range(count):
                try:
                    self._make_room(memory_mb)
                except CapacityError:
                    break
                instance = self._spawn(memory_mb)
                instance.idle_since = time.monotonic()
                instance.prewarmed = True
                started += 1
        self._wake()
        return started

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            instances = list(self._instances)
        for instance in instances:
            self._stop(instance, "cancelled", "the platform was closed")
        self._wake()
        self._monitor.join(timeout=5)
        self._starts.close()
        if self._cgroup is not None:
            self._cgroup.close()

    # ----------------------------------------------------------------- capacity

    def _take_warm(self, memory_mb: int) -> Instance | None:
        """An idle, live instance of ``memory_mb`` (dead idle ones are discarded)."""
        for instance in list(self._instances):
            if instance.invocation is None and instance.process.poll() is not None:
                self._discard(instance)
        for instance in self._instances:
            if instance.invocation is None and instance.memory_mb == memory_mb:
                if instance.throttle is not None:
                    instance.throttle.release()
                    instance.throttle = None
                return instance
        return None

    def _make_room(self, memory_mb: int) -> None:
        """Evict idle instances until one more of ``memory_mb`` fits, or raise CapacityError."""
        while not self._fits(memory_mb):
            idle = [i for i in self._instances if i.invocation is None]
            if not idle:
                busy = sum(1 for i in self._instances if i.invocation is not None)
                raise CapacityError(
                    f"the local platform is full: {busy} functions are running and one more of "
                    f"{memory_mb} MB would exceed this machine's capacity "
                    f"({self.platform.capacity_vcpus} vCPUs, "
                    f"{self.platform.capacity_memory_mb} MB, "
                    f"{self.platform.concurrency_limit} functions)"
                )
            oldest = min(idle, key=lambda i: i.idle_since)
            self._discard(oldest)

    def _fits(self, memory_mb: int) -> bool:
        live = self._instances
        if len(live) + 1 > self.platform.concurrency_limit:
            return False
        if self.platform.capacity_vcpus is not None:
            used = sum(i.vcpus for i in live) + self.vcpus(memory_mb)
            if used > self.platform.capacity_vcpus + 1e-9:
                return False
        if self.platform.capacity_memory_mb is not None:
            used_mb = sum(i.memory_mb for i in live) + memory_mb
            if used_mb > self.platform.capacity_memory_mb + 1e-9:
                return False
        return True

    # ----------------------------------------------------------------- instances

    def _env(self, memory_mb: int) -> dict[str, str]:
        """The environment of an instance of ``memory_mb``: its thread counts and size."""
        vcpus = self.vcpus(memory_mb)
        # Whole vCPUs only: a pool of two threads under a quota of 1.01 vCPU is throttled
        # every period (measured: a PyTorch step 1.3-3x slower than one thread at 0.98 vCPU).
        threads = str(max(1, math.floor(vcpus + 1e-9)))
        env = dict(os.environ)
        env.update(
            {
                "OMP_NUM_THREADS": threads,
                "MKL_NUM_THREADS": threads,
                "OPENBLAS_NUM_THREADS": threads,
                "FAASML_FUNCTION_MEMORY_MB": str(memory_mb),
                "FAASML_FUNCTION_VCPUS": f"{vcpus:.4f}",
                "MALLOC_ARENA_MAX": "2",
                "FAASML_RLIMIT_AS": "1" if self.address_space_limit else "0",
            }
        )
        return env

    def _spawn(self, memory_mb: int) -> Instance:
        vcpus = self.vcpus(memory_mb)
        parent, child = Pipe(duplex=True)
        env = self._env(memory_mb)
        spawned = time.monotonic()
        try:
            process = self._starts.start(memory_mb, env, child.fileno())
        finally:
            child.close()
        instance = Instance(memory_mb, vcpus, process, parent, spawned)
        self._attach_cgroup(instance)  # a forked one's pid is known by the time it is ready
        self._instances.append(instance)
        self._cold_starts += 1
        return instance

    def _attach_cgroup(self, instance: Instance) -> None:
        if self._cgroup is not None and instance.cgroup is None and instance.pid:
            try:
                instance.cgroup = self._cgroup.attach(instance.pid, instance.vcpus)
            except OSError:
                instance.cgroup = None

    def _discard(self, instance: Instance) -> None:
        """Kill an instance and forget it (lock held by the caller or not needed)."""
        if instance in self._instances:
            self._instances.remove(instance)
        if instance.throttle is not None:
            instance.throttle.release()
        with contextlib.suppress(ProcessLookupError):
            instance.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            instance.process.wait(timeout=5)
        self._retired.append(instance.conn)
        if instance.cgroup is not None:
            CgroupCpu.detach(instance.cgroup)

    def _stop(self, instance: Instance, kind: str, message: str) -> None:
        # Billed up to the moment it was stopped, not through the kill and reaping that follow;
        # a timeout is billed up to its limit exactly, as AWS Lambda bills one.
        stopped = time.monotonic()
        with self._lock:
            invocation = instance.invocation
            instance.invocation = None
            self._discard(instance)
        if invocation is not None:
            if kind == "timeout":
                stopped = min(stopped, invocation.deadline)
            self._complete(invocation, None, FunctionError(kind, message), stopped)

    def _complete(
        self,
        invocation: LocalInvocation,
        value: Any,
        error: FunctionError | None,
        end: float | None = None,
    ) -> None:
        end = time.monotonic() if end is None else end
        start = invocation.dispatched
        if invocation.cold and not self.platform.bills_cold_start:
            start += invocation.init_s
        billed = Billed(
            duration_s=max(0.0, end - start),
            memory_mb=invocation.memory_mb,
            cold=invocation.cold,
            init_s=invocation.init_s,
            ok=error is None,
        )
        invocation._finish(value, error, billed)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send_bytes(b"!")

    # ----------------------------------------------------------------- monitor

    def _watch(self) -> None:
        try:
            self._watch_instances()
        finally:
            self._close_retired()

    def _close_retired(self) -> None:
        with self._lock:
            retired, self._retired = self._retired, []
        for conn in retired:
            conn.close()

    def _watch_instances(self) -> None:
        while True:
            self._close_retired()
            with self._lock:
                if self._closed and not self._instances:
                    return
                instances = list(self._instances)
            timeout = TICK_S
            now = time.monotonic()
            for instance in instances:
                if instance.throttle is not None and instance.invocation is not None:
                    timeout = min(timeout, max(0.0, instance.throttle.tick(now) - now))
            conns = [i.conn for i in instances if not i.conn.closed]
            try:
                ready = wait([self._wake_r, *conns], timeout=timeout)
            except OSError:
                ready = []
            if self._wake_r in ready:
                with contextlib.suppress(EOFError, OSError):
                    while self._wake_r.poll():
                        self._wake_r.recv_bytes()
            for instance in instances:
                if instance.conn in ready and instance in self._instances:  # not discarded
                    try:
                        self._receive(instance)
                    except Exception as err:  # the monitor must live on, or nothing ends
                        self._stop(instance, "killed", f"the platform lost the instance: {err!r}")
            self._check(instances)
            if self._closed:
                with self._lock:
                    if not self._instances:
                        return

    def _receive(self, instance: Instance) -> None:
        try:
            message = instance.conn.recv()
        except (EOFError, OSError):
            self._died(instance)
            return
        tag = message[0]
        if tag == "ready":
            self._ready(instance, float(message[1]))
            return
        with self._lock:
            invocation = instance.invocation
            instance.invocation = None
            instance.idle_since = time.monotonic()
            if instance.throttle is not None:
                instance.throttle.release()
                instance.throttle = None
        if invocation is None:
            return
        if tag == "ok":
            self._complete(invocation, message[1], None)
        else:
            _, kind, text, detail = message
            self._complete(invocation, None, FunctionError(kind, text, detail))
            if kind == "out-of-memory":
                with self._lock:
                    self._discard(instance)

    def _ready(self, instance: Instance, ready_at: float) -> None:
        """The instance has started: its start's figures, then the message it was given while
        starting (``_dispatch``), sent outside the lock: the instance reads it now."""
        with self._lock:
            instance.ready_at = ready_at
            self._attach_cgroup(instance)
            invocation = instance.invocation
            pending, instance.pending = instance.pending, []
            if invocation is not None and invocation.cold:
                invocation.init_s = max(0.0, ready_at - invocation.dispatched)
            if invocation is not None and self._cpu_mode == "duty-cycle":
                instance.throttle = DutyCycle(instance.pid, instance.vcpus, time.monotonic())
            if instance.prewarmed and self.platform.bills_cold_start:
                # An invocation that took it before it was ready bills the rest of its start;
                # a prewarmed instance's start is billed on its own.
                end = ready_at if invocation is None else invocation.dispatched
                init_s = max(0.0, min(end, ready_at) - instance.spawned)
                self._standalone.append(
                    Billed(init_s, instance.memory_mb, cold=True, init_s=init_s, ok=True)
                )
        for message in pending:
            try:
                instance.conn.send(message)
            except (OSError, ValueError):
                self._stop(instance, "killed", "could not reach a newly started instance")
                return

    def _died(self, instance: Instance) -> None:
        code = instance.process.poll()
        if code is None:  # its end is being reaped (a forked one's, by the template)
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = instance.process.wait(timeout=5)
        # Running out of memory is reported by the function (MemoryError) or by the resident
        # memory watch before this; a process that just ended was killed or crashed.
        self._stop(instance, "killed", f"the function's process ended (exit status {code})")

    def _check(self, instances: list[Instance]) -> None:
        now = time.monotonic()
        for instance in instances:
            invocation = instance.invocation
            if invocation is None:
                if now - instance.idle_since > self.idle_timeout_s and instance.ready_at:
                    with self._lock:
                        if instance.invocation is None:
                            self._discard(instance)
                continue
            if invocation.cancel_requested:
                self._stop(instance, "cancelled", "cancelled by the caller")
            elif now > invocation.deadline:
                limit = invocation.deadline - invocation.dispatched
                self._stop(instance, "timeout", f"ran past its maximum duration of {limit:g} s")
            elif self.memory_check and rss_mb(instance.pid) > instance.memory_mb:
                self._stop(
                    instance, "out-of-memory", f"resident memory over {instance.memory_mb} MB"
                )
            elif instance.process.poll() is not None:
                self._died(instance)
