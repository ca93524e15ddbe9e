"""A worker's heartbeat and its wait for its peers to start.

The coordinator tells a slow worker (still beating) from a silent one by the heartbeat key
each worker refreshes; a worker waits for every peer's first beat before its first round, so
the rounds' synchronisation timeout only ever waits for workers that are running.
"""

from __future__ import annotations

import os
import threading
import time

from faasml.runtime.function.task import WorkerTask
from faasml.sync.stores import Store

HEARTBEAT_S = 1.0
"""A worker refreshes its heartbeat key at most this often."""


class Heartbeat:
    """Writes ``time round pid`` under a key every HEARTBEAT_S from a thread, so the
    coordinator can tell a slow worker (still beating) from a silent one.

    One thread per instance beats for the segment in progress (``start``/``stop`` name and
    clear its key) and sleeps between segments, as a warm function keeps its globals: a thread
    started and joined per segment cost milliseconds of scheduling on a busy machine against
    segments of tens. After ``stop`` returns, nothing more is written under the old key."""

    def __init__(self) -> None:
        self.round_id = 0
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._key = ""
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, store: Store, key: str) -> None:
        """Beat under ``key`` now and every HEARTBEAT_S until ``stop``."""
        with self._lock:
            self._store, self._key, self.round_id = store, key, 0
            self._beat()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="faasml-heartbeat", daemon=True)
            self._thread.start()
        self._wake.set()

    def _beat(self) -> None:
        if self._store is not None:
            value = f"{time.time():.3f} {self.round_id} {os.getpid()}".encode()
            self._store.put(self._key, value)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(HEARTBEAT_S)
            with self._lock:
                if self._store is None:
                    self._wake.clear()  # idle until the next segment starts
                    continue
                self._beat()

    def stop(self) -> None:
        """No more beats under the segment's key (a beat being written finishes first)."""
        with self._lock:
            self._store = None


HEARTBEAT = Heartbeat()
"""The instance's heartbeat (its thread lives while the instance is warm)."""


def await_peers(objects: Store, task: WorkerTask) -> None:
    """Wait until every worker of the segment has started (its heartbeat is there), at most
    ``task.start_timeout_s``: the rounds' synchronisation timeout then only ever waits for
    workers that are running. TimeoutError names the first worker that did not start."""
    prefix = f"{task.namespace}/hb/w"
    waiting = [w for w in range(task.n) if w != task.worker_id]
    end = time.monotonic() + task.start_timeout_s
    delay = 0.001
    while True:
        waiting = [w for w in waiting if objects.get(f"{prefix}{w}") is None]
        if not waiting:
            return
        if time.monotonic() >= end:
            raise TimeoutError(
                f"worker {waiting[0]} did not start within {task.start_timeout_s:.0f} s "
                f"(worker {task.worker_id} waited for it)"
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
