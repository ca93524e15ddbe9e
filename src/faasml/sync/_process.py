"""Child server processes that do not outlive their parent."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Run in the child before exec: on Linux, get SIGTERM when the parent dies, so a killed
    test or benchmark leaves no server behind (Linux ties this to the thread that started the
    child: start servers from a thread that outlives them). Elsewhere nothing happens."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
