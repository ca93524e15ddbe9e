"""Why a simulated deployment search missed: each miss put in one class from the truth.

The simulator knows every candidate's true objective, so a search that ends outside 5 % of the
optimum can be told apart by where it failed: no deployment keeps the constraint at all; no
good deployment could be probed within the search's dollar budget (the choice had to be an
extrapolation); a good deployment was probed but another chosen (the final pick under noise);
or the search stopped before probing a good one (the expected improvement fell below its
threshold, or the probe count or the dollars ran out: the surrogate and the acquisition).

``ceiling``: the most a search could reach at the same dollar budget if, wherever a good
deployment's probe fits it, it probed a good one and chose it; elsewhere a choice is an
extrapolation that no probe it can pay for checks, right only where the prior happens to be.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
from numpy.typing import NDArray

INFEASIBLE = "no deployment keeps the constraint"
UNPROBEABLE = "no good deployment's probe fits the budget"
PICK = "a good deployment was probed, another chosen"
STOP_EI = "stopped by EI before probing a good one"
STOP_COUNT = "probes spent before probing a good one"
STOP_USD = "dollars spent before probing a good one"
REASONS = (INFEASIBLE, UNPROBEABLE, PICK, STOP_EI, STOP_COUNT, STOP_USD)


def why_missed(
    good: NDArray[np.bool_],
    choice: int,
    probed: Collection[int],
    *,
    feasible: bool,
    stop_reason: str,
    prices: NDArray[np.float64] | None = None,
    max_usd: float | None = None,
) -> str | None:
    """The class of a miss (one of ``REASONS``), or None when ``good[choice]`` (a hit).

    ``good``: per candidate, within 5 % of the optimum (the benchmark's judgement);
    ``probed``: the candidates the search measured; ``feasible``: some candidate keeps the
    constraint; ``prices`` and ``max_usd``: each candidate's predicted probe price and the
    search's dollar budget (a good candidate priced above it could never be probed)."""
    if bool(good[choice]):
        return None
    if not feasible:
        return INFEASIBLE
    if any(bool(good[i]) for i in probed):
        return PICK
    if not probe_fits(good, prices=prices, max_usd=max_usd):
        return UNPROBEABLE
    if "expected improvement" in stop_reason:
        return STOP_EI
    if "probe budget" in stop_reason or "every candidate" in stop_reason:
        return STOP_COUNT
    return STOP_USD


def probe_fits(
    good: NDArray[np.bool_],
    *,
    prices: NDArray[np.float64] | None = None,
    max_usd: float | None = None,
) -> bool:
    """Some good candidate's predicted probe price fits the search's dollar budget ``max_usd``
    (any good candidate when there are no prices or no dollar budget)."""
    if prices is None or max_usd is None:
        return bool(np.any(good))
    return bool(np.any(good & (prices <= max_usd)))


def ceiling(hits: Sequence[bool], fits: Sequence[bool]) -> float:
    """The most a search could reach at this dollar budget, as a share of the instances.

    Per instance, ``hits``: the search's choice was within 5 %; ``fits``: some good
    deployment's probe fits the budget (``probe_fits``). A search that, wherever one fits,
    probed a good deployment and chose it, and elsewhere chose as this one did, is within on
    the instances where either holds; elsewhere no probe it can pay for finds a good one."""
    if len(hits) != len(fits):
        raise ValueError(f"{len(hits)} hits against {len(fits)} fits: one of each per instance")
    if not hits:
        return float("nan")
    return sum(bool(h) or bool(f) for h, f in zip(hits, fits, strict=True)) / len(hits)
