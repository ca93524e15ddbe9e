"""The cache of measured job profiles: where it lives, reading and keeping a profile, and
correcting a cached one that a run's own epochs disagree with.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

from faasml.runtime.profile.check import STALE_THRESHOLD, drift_action, epochs_line
from faasml.runtime.profile.record import JobProfile


def cache_dir() -> Path:
    """``$FAASML_CACHE/profiles``, else ``$XDG_CACHE_HOME/faasml/profiles`` (~/.cache)."""
    root = os.environ.get("FAASML_CACHE")
    if root:
        return Path(root) / "profiles"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "faasml" / "profiles"


def cached_profile(key: str) -> JobProfile | None:
    """The profile cached under ``key``; None where none is (or it cannot be read)."""
    path = cache_dir() / f"{key}.json"
    try:
        return JobProfile.from_dict(json.loads(path.read_text()), cached=True)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def epochs_checked(profile: JobProfile, ratio: float) -> str | None:
    """The cached ``profile`` after a run's own epochs computed at ``ratio`` times its time
    per sample: kept within ``STALE_THRESHOLD``; beyond it, its computation rescaled to them
    in the cache; beyond ``RESCALE_LIMIT``, removed, so that the next run measures the job
    again. The run's event line; None where kept (or the cache holds another profile now)."""
    action = drift_action((ratio,), STALE_THRESHOLD)
    current = cached_profile(profile.key)
    if action == "kept" or current is None or current.compute_points != profile.compute_points:
        return None
    if action == "rescaled":
        points = tuple((m, s * ratio) for m, s in profile.compute_points)
        store_profile(dataclasses.replace(profile, compute_points=points))
    else:
        try:
            (cache_dir() / f"{profile.key}.json").unlink()
        except OSError:
            return None
    return epochs_line(ratio, action)


def store_profile(profile: JobProfile) -> None:
    """Keep ``profile`` in the cache (atomically; not at all where the cache is read-only)."""
    profile = dataclasses.replace(profile, check=None)  # a run's re-check stays in its record
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            json.dump(profile.to_dict(), out, indent=1)
        os.replace(temp, folder / f"{profile.key}.json")
    except OSError:  # a read-only home: the profile is still used, just not kept
        pass


def quickest_profiling_s(limit: int = 200) -> float | None:
    """The shortest ``profiling_s`` of the profiles in the cache (at most ``limit`` read): what
    measuring a job has taken at least on this machine; None where the cache holds none."""
    quickest: float | None = None
    for index, path in enumerate(sorted(cache_dir().glob("*.json"))):
        if index >= limit:
            break
        try:
            seconds = float(json.loads(path.read_text())["profiling_s"])
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if seconds > 0 and (quickest is None or seconds < quickest):
            quickest = seconds
    return quickest
