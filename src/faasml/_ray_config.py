"""Settings for the local Ray clusters faasml starts (its tests, `faasml cluster run`)."""

from __future__ import annotations

LOCAL_SYSTEM_CONFIG: dict[str, int] = {"worker_niceness": 0}
"""Ray starts its worker processes at nice 15: beside any busy process they get a few per
cent of a core (an actor importing PyTorch took 100 s instead of 5 beside two busy loops).
faasml's workers are the work itself, so they run at the caller's priority."""
