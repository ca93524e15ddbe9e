"""A module a local function preloads that holds its start until a file exists (the tests of
what a caller waits for while a function starts).

On import it waits for the path in ``FAASML_TEST_GATE`` (at most ``FAASML_TEST_GATE_S``
seconds, default 20) and remembers whether the file opened it or the wait ran out."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def _wait() -> str:
    path = os.environ.get("FAASML_TEST_GATE")
    if not path:
        return "no gate"
    end = time.monotonic() + float(os.environ.get("FAASML_TEST_GATE_S", "20"))
    while time.monotonic() < end:
        if Path(path).exists():
            return "file"
        time.sleep(0.01)
    return "timeout"


OPENED_BY = _wait()
"""What ended the start's wait: "file", "timeout" or "no gate"."""


def opened_by(payload: Any) -> tuple[str, int]:
    """What opened the gate as this instance started, and the payload's length."""
    return OPENED_BY, len(payload)
