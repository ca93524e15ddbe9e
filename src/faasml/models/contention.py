"""What a shared, bounded machine delivers to functions running side by side (pure).

On the local platform k functions each holding a CPU quota of v vCPUs share the machine's
cores with whatever else runs there, so together they may get less than k·v. The job probe
measures it (``job_probe``'s group: k functions computing at once against one alone), and
``FunctionPlatform.contention`` turns the vCPUs delivered into how much slower a wave of a
stage runs. These helpers read the probe's measurements.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any

from faasml.catalog import Catalog

__all__ = ["cold_start_alone", "delivered_vcpus"]


def delivered_vcpus(
    results: list[dict[str, Any]], vcpus: float, catalog: Catalog
) -> tuple[float, float]:
    """(vCPUs delivered, slowdown) from a probe group: k functions of ``vcpus`` each computing
    at once ran ``ratio`` times slower per sample than one alone just after, so the machine
    delivered k × vcpus / ratio (at most its capacity); (0, 0) without a group."""
    side = [
        float(r["side_by_side_s_per_sample"]) for r in results if "side_by_side_s_per_sample" in r
    ]
    solo = float(results[0]["compute_s_per_sample"])
    if len(results) < 2 or len(side) < len(results) or solo <= 0:
        return 0.0, 0.0
    ratio = statistics.mean(side) / solo
    capacity = catalog.platform.capacity_vcpus or math.inf
    demand = vcpus * len(results)
    return min(capacity, demand / max(ratio, 1.0)), ratio


def cold_start_alone(colds: list[tuple[float, float]], delivered: float, catalog: Catalog) -> float:
    """The median measured start at one vCPU, each taken back to a start alone: starts that
    ran k at once shared the machine (``FunctionPlatform.contention``)."""
    if not colds:
        return catalog.platform.cold_start_s
    platform = dataclasses.replace(catalog.platform, delivered_vcpus=delivered or None)
    return statistics.median(s / platform.contention(demand) for s, demand in colds)


SOLO_TIMINGS = (
    "compute_s_per_sample",
    "eval_s_per_sample",
    "config_compute_s",
    "config_eval_s",
    "checkpoint_s",
)
"""What a probe function times alone (``job_probe._probe_recipes``)."""


def solo_disturbed(results: list[dict[str, Any]]) -> bool:
    """True where the function timed alone ran slower per sample than the group had side by
    side: on a machine the group fills, that timing was slowed by something else."""
    side = [
        float(r["side_by_side_s_per_sample"]) for r in results if "side_by_side_s_per_sample" in r
    ]
    if not side or len(results) < 2:
        return False
    return float(results[0]["compute_s_per_sample"]) > statistics.mean(side)


def faster_solo(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """``first`` with the solo timings of ``again`` where it computed faster (the peak
    memory the larger of the two)."""
    out = dict(first)
    out["peak_rss_mb"] = max(float(first["peak_rss_mb"]), float(again["peak_rss_mb"]))
    if float(again["compute_s_per_sample"]) < float(first["compute_s_per_sample"]):
        out.update({key: again[key] for key in SOLO_TIMINGS if key in again})
    return out
