"""Small module-level functions the platform conformance suite invokes inside functions."""

from __future__ import annotations

import os
import time
from typing import Any

from faasml.runtime.function.echo import echo

__all__ = ["allocate", "echo", "exit_process", "fail", "pid", "sleep", "spin", "visible_gpus"]


def fail(message: str) -> None:
    """Raise an error inside the function."""
    raise RuntimeError(message)


def sleep(seconds: float) -> float:
    """Sleep, then return the seconds slept."""
    time.sleep(seconds)
    return seconds


def allocate(megabytes: int) -> int:
    """Touch ``megabytes`` MB of memory; returns the MB held."""
    block = bytearray(megabytes * 2**20)
    for index in range(0, len(block), 4096):
        block[index] = 1
    return len(block) // 2**20


def allocate_tensor(megabytes: int) -> int:
    """Allocate a ``megabytes`` MB torch tensor (torch's allocator, not Python's); returns the
    MB held."""
    import torch

    return int(torch.ones(megabytes * 2**18).numel() // 2**18)


def spin(seconds: float) -> dict[str, float]:
    """Busy-loop for ``seconds`` of wall time; returns wall and CPU seconds used."""
    wall0, cpu0 = time.monotonic(), time.process_time()
    while time.monotonic() - wall0 < seconds:
        sum(range(1000))
    return {"wall_s": time.monotonic() - wall0, "cpu_s": time.process_time() - cpu0}


def pid(_: Any = None) -> int:
    """The process id of the instance (warm reuse keeps it)."""
    return os.getpid()


def exit_process(code: int) -> None:
    """End the instance's process abruptly, as a crashed runtime does."""
    os._exit(code)


def visible_gpus(_: Any = None) -> str | None:
    """The GPUs the instance may use (``CUDA_VISIBLE_DEVICES``, which Ray sets for its GPUs)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES")
