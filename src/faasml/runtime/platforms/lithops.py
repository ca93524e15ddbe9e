"""The Lithops platform: functions through a Lithops ``FunctionExecutor`` (MISSION C7, C8).

Every invocation is one ``call_async`` with the function's memory as ``runtime_memory`` and its
maximum duration as Lithops' ``timeout``; the call runs :func:`run_in_function`, which caps the
address space of the function's process at its memory size (``RLIMIT_AS``, the local
platform's helper) before it runs the function, so a function over its size fails as
``out-of-memory`` on back-ends that do not enforce memory themselves (localhost). Any Lithops
back-end works through its configuration (``config`` dict or ``config_file``); the default is
the ``localhost`` back-end with this Python interpreter as its runtime.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from faasml._imports import optional_import
from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.runtime.platforms import _host
from faasml.runtime.platforms._common import SettledInvocation, check_open, invocation_args
from faasml.runtime.platforms.contract import (
    Billed,
    Enforcement,
    FunctionError,
    FunctionRef,
    Invocation,
    Platform,
)

GRACE_S = 5.0
"""How long past its maximum duration the caller waits for the back-end's own timeout."""


def run_in_function(call: dict[str, Any]) -> dict[str, Any]:
    """The Lithops entry point: import ``call['preload']``, cap memory, run
    ``call['ref'](call['payload'])``, report."""
    held = _host._resident_bytes()
    for name in call.get("preload", ()):
        importlib.import_module(name)
    if call["rlimit_as"]:
        # The preloaded modules' address space (torch reserves far more than it touches) is
        # outside the cap; what they hold resident counts against the function's memory.
        held = _host._resident_bytes() - held
        _host._limit_address_space(int(call["memory_mb"]), held)
    start = time.time()
    try:
        value = _host._run(call["ref"], call["payload"])
    except MemoryError:
        message = f"over {call['memory_mb']} MB"
        return {"ok": False, "kind": "out-of-memory", "message": message, "start": start}
    except BaseException as err:  # the function's failure goes back to the caller
        kind = "out-of-memory" if _host._out_of_memory(err) else "error"
        return {
            "ok": False,
            "kind": kind,
            "message": f"{type(err).__name__}: {err}",
            "detail": traceback.format_exc(),
            "start": start,
        }
    return {"ok": True, "value": value, "start": start, "end": time.time()}


class LithopsInvocation(SettledInvocation):
    """One Lithops call; completed by a waiting thread, or by the caller's cancel."""

    def cancel(self) -> None:
        """Lithops cannot stop one call: the result is abandoned as ``cancelled`` now and
        the call ends on its back-end at its own timeout."""
        self._fail("cancelled", "cancelled by the caller", cold=True)


class LithopsPlatform(Platform):
    """Functions through a Lithops FunctionExecutor (localhost back-end by default)."""

    name = "lithops"

    def __init__(
        self,
        catalog: Catalog,
        *,
        backend: str = "localhost",
        storage: str = "localhost",
        config: dict[str, Any] | None = None,
        config_file: str | None = None,
        address_space_limit: bool = True,
        preload: tuple[str, ...] = (),
    ) -> None:
        super().__init__(catalog)
        lithops = optional_import("lithops", "lithops")
        self.platform = catalog.platform
        self.address_space_limit = address_space_limit
        self.preload = tuple(preload)
        """Modules each call imports before its memory is capped (as a deployment package's)."""
        settings = self._settings(backend, storage, config, config_file)
        self.backend = str(settings["lithops"]["backend"])
        self._workers: int | None = None
        if self.backend == "localhost":  # Lithops runs as many calls at once as its workers
            local = settings.get("localhost") or {}
            self._workers = int(local.get("worker_processes") or os.cpu_count() or 1)
        try:
            self._executor = lithops.FunctionExecutor(config=settings)
        except Exception as err:  # Lithops raises bare Exceptions for bad configuration
            raise ConfigError(f"cannot open the Lithops back-end {self.backend!r}: {err}") from err
        self._lock = threading.Lock()
        self._calls = 0
        self._closed = False

    @staticmethod
    def _settings(
        backend: str, storage: str, config: dict[str, Any] | None, config_file: str | None
    ) -> dict[str, Any]:
        if config is not None and config_file is not None:
            raise ConfigError("give the Lithops configuration as config or config_file, not both")
        if config_file is not None:
            import yaml

            path = Path(config_file)
            if not path.is_file():
                raise ConfigError(f"the Lithops config file {config_file} does not exist")
            loaded = yaml.safe_load(path.read_text())
            if not isinstance(loaded, dict) or "lithops" not in loaded:
                raise ConfigError(f"the Lithops config file {config_file} has no 'lithops' section")
            return loaded
        if config is not None:
            if "lithops" not in config:
                raise ConfigError("the Lithops config has no 'lithops' section")
            return config
        settings: dict[str, Any] = {
            "lithops": {"backend": backend, "storage": storage, "log_level": "WARNING"}
        }
        if backend == "localhost":
            settings["localhost"] = {"runtime": sys.executable}
        return settings

    @property
    def enforcement(self) -> Enforcement:
        memory = "rlimit-as" if self.address_space_limit else "none"
        if self.backend != "localhost":
            memory = f"{memory}+{self.backend}"
        cpu = "none" if self.backend == "localhost" else self.backend
        return Enforcement(memory=memory, cpu=cpu, duration="kill")

    @property
    def cold_starts(self) -> int:
        return self._calls

    @property
    def max_concurrency(self) -> int:
        limit = self.catalog.platform.concurrency_limit
        return limit if self._workers is None else min(limit, self._workers)

    def invoke(
        self, fn: FunctionRef, payload: Any, memory_mb: int, timeout_s: float | None = None
    ) -> Invocation:
        ref, limit = invocation_args(self.platform, fn, memory_mb, timeout_s)
        call = {
            "ref": ref,
            "payload": payload,
            "memory_mb": memory_mb,
            "rlimit_as": self.address_space_limit,
            "preload": self.preload,
        }
        with self._lock:
            check_open(self._closed)
            invocation = LithopsInvocation(memory_mb, time.monotonic())
            future = self._executor.call_async(
                run_in_function, (call,), runtime_memory=memory_mb, timeout=max(1, round(limit))
            )
            self._calls += 1
        waiter = threading.Thread(target=self._wait, args=(invocation, future, limit), daemon=True)
        waiter.start()
        guard = threading.Timer(
            limit + GRACE_S,
            self._fail,
            (invocation, None, "timeout", f"ran past its maximum duration of {limit:g} s"),
        )
        guard.daemon = True  # the back-end kills the call at its timeout; this is the backstop
        guard.start()
        return invocation

    def _wait(self, invocation: LithopsInvocation, future: Any, limit: float) -> None:
        try:
            outcome: dict[str, Any] = future.result(throw_except=True)
        except Exception as err:  # the function's process died or the back-end failed
            kind = "timeout" if "maximum time" in str(err) else "killed"
            self._fail(invocation, future, kind, f"{type(err).__name__}: {err}")
            return
        stats = getattr(future, "stats", {}) or {}
        cold = bool(stats.get("worker_cold_start", True))
        duration = float(stats.get("worker_exec_time", time.monotonic() - invocation.dispatched))
        error = None
        if not outcome["ok"]:
            detail = str(outcome.get("detail", ""))
            error = FunctionError(str(outcome["kind"]), str(outcome["message"]), detail)
        billed = Billed(duration, invocation.memory_mb, cold, 0.0, ok=error is None)
        invocation._finish(outcome.get("value"), error, billed)

    def _fail(self, invocation: LithopsInvocation, future: Any, kind: str, message: str) -> None:
        stats = getattr(future, "stats", {}) or {}
        duration = float(stats["worker_exec_time"]) if "worker_exec_time" in stats else None
        invocation._fail(kind, message, cold=True, duration_s=duration)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Stops Lithops' job monitor and invokers and kills the calls still running (after a
        # Ctrl-C, a budget stop): left alone they run on past this process, and the monitor's
        # next poll logs a traceback once the interpreter has shut its thread pools down.
        with contextlib.suppress(Exception):
            self._executor.__exit__(None, None, None)
        if self._executor.data_cleaner:
            with contextlib.suppress(Exception):
                self._executor.clean(clean_cloudobjects=False)
