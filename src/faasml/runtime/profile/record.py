"""The record of a measured job profile: what ``job_profile.measure_job`` found, its JSON form
(in the cache and in run records), checked field by field when read back."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MEMORY_MARGIN = 0.2
"""Memory the planner adds to the measured footprint (20 %): allocator growth, larger
evaluation batches, a busier garbage collector."""

_NUMBERS = (
    "params",
    "model_mb",
    "bytes_per_sample",
    "footprint_mb",
    "checkpoint_s",
    "cold_start_s",
    "dispatch_s",
    "train_samples",
    "test_samples",
    "configs",
    "profiling_usd",
    "profiling_s",
    "delivered_vcpus",
    "side_by_side_ratio",
    "sync_memory_mb",
    "straggler_share",
)
"""The profile's numeric fields (a record or cache file is checked before use)."""


@dataclass(frozen=True)
class JobProfile:
    """What the probe measured of a job on a platform."""

    key: str
    params: int
    model_mb: float
    bytes_per_sample: float
    footprint_mb: float
    """Peak resident memory of a function training the job's largest configuration with the
    whole training set (runtime and framework included)."""
    compute_points: tuple[tuple[int, float], ...]
    """(memory MB, seconds of training computation per sample)."""
    eval_points: tuple[tuple[int, float], ...]
    """(memory MB, seconds of evaluation per test sample)."""
    checkpoint_s: float
    """Saving and loading one checkpoint (per invocation)."""
    cold_start_s: float
    """A function's start (process, imports), at one vCPU."""
    dispatch_s: float
    """A warm invocation's round trip with no work."""
    train_samples: int
    test_samples: int
    configs: int
    profiling_usd: float
    profiling_s: float
    delivered_vcpus: float = 0.0
    """vCPUs the machine delivered to the probe's functions computing side by side (0: not
    measured, the platform's capacity stands)."""
    side_by_side_ratio: float = 0.0
    """Training time per sample of k functions computing at once over one alone (0: not
    measured)."""
    sync_storage: str = ""
    """The catalog storage the synchronised round went through ("": not measured)."""
    sync_memory_mb: int = 0
    """Memory of the two functions of the synchronised round."""
    sync_rounds: tuple[tuple[str, float, float], ...] = ()
    """(scheme, transfer s, straggler wait s) per round of two functions (``sync_probe``)."""
    straggler_share: float = 0.0
    """The straggler wait over a round's computation in that round (0: not measured)."""
    measured_at: str = ""
    cached: bool = False
    notes: tuple[str, ...] = field(default=())
    load_avg: float | None = None
    """The machine's 1-minute load average when these figures were measured (None: not
    recorded, a record older than the field)."""
    config_costs: tuple[tuple[str, float], ...] = ()
    """Each configuration the probe built of the search space (canonical JSON) and its training
    and evaluation seconds per sample over their mean (``config_cost``; empty: not measured,
    a record older than the field)."""
    check: ProfileCheck | None = None
    """The re-check a run made of this cached profile before planning (``profile_check``);
    None when it was not re-checked. Kept in run records, not in the cache."""

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("cached")
        return data

    @staticmethod
    def from_dict(data: Mapping[str, Any], *, cached: bool = False) -> JobProfile:
        """A profile from its JSON form; ValueError naming the first field that is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("a profile is a mapping of its fields")
        values = dict(data)
        values["load_avg"] = _load(values.get("load_avg"), "load_avg")
        check = values.get("check")
        values["check"] = None if check is None else ProfileCheck.from_dict(check)
        for name in ("delivered_vcpus", "side_by_side_ratio", "sync_memory_mb", "straggler_share"):
            values.setdefault(name, 0.0)  # absent from older records
        values["sync_memory_mb"] = _whole(values["sync_memory_mb"])
        values["sync_rounds"] = _sync_rounds(values.get("sync_rounds", ()))
        values["config_costs"] = _config_costs(values.get("config_costs", ()))
        for name in _NUMBERS:
            value = values.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be finite and >= 0, not {value!r}")
        for name in ("compute_points", "eval_points"):
            points = values.get(name)
            if not isinstance(points, list | tuple) or not points:
                raise ValueError(f"{name} must be a non-empty list of [memory MB, seconds]")
            for point in points:
                ok = isinstance(point, list | tuple) and len(point) == 2
                if not ok or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < math.inf
                    for v in point
                ):
                    raise ValueError(f"{name} has {point!r}; each must be [memory MB, seconds]")
            values[name] = tuple(tuple(p) for p in points)
        notes = values.get("notes", ())
        if not isinstance(notes, list | tuple) or not all(isinstance(n, str) for n in notes):
            raise ValueError("notes must be a list of texts")
        values["notes"] = tuple(notes)
        texts = (values.get("key"), values.get("measured_at", ""), values.get("sync_storage", ""))
        if not all(isinstance(text, str) for text in texts):
            raise ValueError("key, measured_at and sync_storage must be texts")
        return JobProfile(**values, cached=cached)

    def memory_floor_mb(self, margin: float = MEMORY_MARGIN) -> float:
        """The least function memory the planner may choose: footprint × (1 + margin)."""
        return self.footprint_mb * (1.0 + margin)

    def summary(self) -> str:
        """The profile on one line (events, the dashboard): ``summary_lines`` joined."""
        head, *facts = self.summary_lines()
        return "; ".join([head, *(fact.strip() for fact in facts)])

    def summary_lines(self) -> list[str]:
        """The profile as the console prints it: a head line, then one indented fact a line
        (readable at 80 columns and piped)."""
        source = "cached" if self.cached else "measured"
        points = ", ".join(f"{m} MB {s * 1e3:.3g} ms" for m, s in self.compute_points)
        facts = [
            f"footprint {self.footprint_mb:.0f} MB (plans use >= {self.memory_floor_mb():.0f} MB)",
            f"compute per sample {points}",
            f"cold start {self.cold_start_s:.2f} s at 1 vCPU (its set-up included)",
        ]
        if self.side_by_side_ratio > 0:
            facts.append(
                f"side by side {self.side_by_side_ratio:.2f}x slower "
                f"({self.delivered_vcpus:.2f} vCPUs delivered)"
            )
        facts += [
            f"{scheme} round of 2 via {self.sync_storage} {transfer * 1e3:.3g} ms "
            f"+ {wait * 1e3:.3g} ms waiting"
            for scheme, transfer, wait in self.sync_rounds
        ]
        if self.sync_rounds:
            facts.append(f"rounds wait {self.straggler_share:.0%} of a round's computation")
        if len(self.config_costs) > 1:
            costs = [c for _, c in self.config_costs]
            facts.append(
                f"its {len(costs)} model configurations cost "
                f"{min(costs):.2f}-{max(costs):.2f}x their mean"
            )
        if self.load_avg is not None:
            facts.append(f"load {self.load_avg:.1f}")
        facts += [f"note: {note}" for note in self.notes]
        head = (
            f"Job profile ({source}): {self.params:,} parameters ({self.model_mb:.3g} MB), "
            f"{self.bytes_per_sample:.0f} B/sample"
        )
        return [head, *(f"  {fact}" for fact in facts)]


@dataclass(frozen=True)
class ProfileCheck:
    """A cached profile re-checked by a short real measurement at one memory size
    (``profile_check.checked_profile``): the measured over the cached figures there."""

    memory_mb: int
    compute_ratio: float
    """Training seconds per sample measured now over the profile's, at ``memory_mb``."""
    cold_start_ratio: float
    vcpus_ratio: float
    """vCPUs the machine delivered side by side now over the profile's (1: not measured)."""
    load_then: float | None
    load_now: float | None
    """1-minute load averages when the profile was measured and now (None: unknown)."""
    action: str
    """'kept' (within the threshold), 'rescaled' or 're-profiled'."""
    usd: float
    """What the re-check's functions cost (billed as 'profiling')."""
    seconds: float
    functions: int = 1
    """Functions the re-check started at ``memory_mb`` (left warm on the run's platform)."""

    def line(self) -> str:
        """One console line, e.g. 'profile re-checked: computation 0.34x, ...: rescaled'."""
        then = "?" if self.load_then is None else f"{self.load_then:.1f}"
        now = "?" if self.load_now is None else f"{self.load_now:.1f}"
        vcpus = f", vCPUs delivered {self.vcpus_ratio:.2f}x" if self.vcpus_ratio != 1.0 else ""
        return (
            f"profile re-checked at {self.memory_mb} MB: computation {self.compute_ratio:.2f}x, "
            f"cold start {self.cold_start_ratio:.2f}x{vcpus} of the cached figures (load "
            f"{then} then, {now} now): {self.action} "
            f"[{self.seconds:.1f} s, ${self.usd:.6f} profiling]"
        )

    @staticmethod
    def from_dict(data: Any) -> ProfileCheck:
        if not isinstance(data, Mapping):
            raise ValueError("check must be a mapping of its fields")
        values = dict(data)
        values["load_then"] = _load(values.get("load_then"), "check.load_then")
        values["load_now"] = _load(values.get("load_now"), "check.load_now")
        for name in (
            "compute_ratio",
            "cold_start_ratio",
            "vcpus_ratio",
            "usd",
            "seconds",
        ):
            value = values.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"check.{name} must be a number >= 0, not {value!r}")
        if values.get("action") not in ("kept", "rescaled", "re-profiled"):
            raise ValueError(f"check.action is {values.get('action')!r}")
        values["memory_mb"] = int(values["memory_mb"])
        values["functions"] = int(values.get("functions", 1))
        return ProfileCheck(**values)


def _load(value: Any, name: str) -> float | None:
    """A load average read back: a number >= 0, or None (not recorded)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0 or null, not {value!r}")
    return float(value)


def _whole(value: Any) -> int:
    """A count read back (checked as a number already)."""
    if int(value) != value:
        raise ValueError(f"sync_memory_mb must be a whole number, not {value!r}")
    return int(value)


def _sync_rounds(value: Any) -> tuple[tuple[str, float, float], ...]:
    """``sync_rounds`` read back: [scheme, transfer s, straggler wait s] each."""
    if not isinstance(value, list | tuple):
        raise ValueError("sync_rounds must be a list of [scheme, transfer s, wait s]")
    rounds = []
    for entry in value:
        ok = isinstance(entry, list | tuple) and len(entry) == 3 and isinstance(entry[0], str)
        if not ok or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < math.inf
            for v in entry[1:]
        ):
            raise ValueError(f"sync_rounds has {entry!r}; each must be [scheme, seconds, seconds]")
        rounds.append((str(entry[0]), float(entry[1]), float(entry[2])))
    return tuple(rounds)


def _config_costs(value: Any) -> tuple[tuple[str, float], ...]:
    """``config_costs`` read back: [configuration JSON, relative cost > 0] each."""
    if not isinstance(value, list | tuple):
        raise ValueError("config_costs must be a list of [configuration JSON, relative cost]")
    costs = []
    for entry in value:
        ok = isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], str)
        cost = entry[1] if ok else None
        if not ok or isinstance(cost, bool) or not isinstance(cost, int | float):
            raise ValueError(f"config_costs has {entry!r}; each must be [JSON text, cost]")
        if not 0 < cost < math.inf:
            raise ValueError(f"config_costs has {entry!r}; a relative cost must be > 0")
        try:
            json.loads(entry[0])
        except ValueError:
            raise ValueError(f"config_costs has {entry[0]!r}, which is not JSON") from None
        costs.append((entry[0], float(cost)))
    return tuple(costs)
