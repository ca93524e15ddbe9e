"""What FaPES reads off a job's goodput curve (achievement, goodput per GPU, finishing
within a round) and off the board (how long free GPUs stay free)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from faasml.cluster.board import Board
from faasml.cluster.policies._base import FloatArray
from faasml.cluster.records import (
    JobView,
    Placement,
)


def _spare_rounds(board: Board, free: npt.NDArray[np.int64], cap: int = 60) -> float:
    """Median number of rounds (from this one, at most ``cap``) that the GPUs free now stay
    free on the board: how long a back-fill lasts before a plan takes its GPUs back."""
    rows = board.capacity[None, :] - board.by_round[1:cap, :]
    spans: list[int] = []
    for sid in np.flatnonzero(free > 0):
        col = rows[:, sid]
        for j in range(1, int(free[sid]) + 1):
            short = np.flatnonzero(col < j)
            spans.append(1 + (int(short[0]) if len(short) else len(col)))
    return float(np.median(spans)) if spans else 1.0


def _held_back(planned: Placement, cur: Placement, free: npt.NDArray[np.int64]) -> bool:
    """Whether ``cur`` is ``planned`` plus GPUs that are free now (last round's back-fill)."""
    extra = Counter(cur) - Counter(planned)
    return (
        len(cur) > len(planned)
        and sum(extra.values()) == len(cur) - len(planned)
        and all(free[sid] >= c for sid, c in extra.items())
    )


def _speedup_value(curve: FloatArray, weight: float) -> Callable[[float], float]:
    """Minus the inverse speedup of a goodput (the p = -1 fitness of Pollux §4.2), times
    the job's weight."""
    base = weight * (float(curve[1]) if len(curve) > 1 else 1.0)
    return lambda g: -base / g if g > 0 else -1e30


def _at(curve: FloatArray, gpus: int) -> float:
    return float(curve[min(gpus, len(curve) - 1)])


def _finishing(curve: FloatArray, gpus: int, remaining: float, round_s: float) -> bool:
    """Whether a job on ``gpus`` finishes its ``remaining`` work within one round."""
    rate = _at(curve, gpus)
    return rate > 0 and remaining / rate <= round_s


def _achievement(curve: FloatArray, gpus: int) -> float:
    """Goodput on ``gpus`` over the best goodput the model allows (FaPES §5.1)."""
    top = float(curve.max())
    return _at(curve, gpus) / top if top > 0 else 0.0


def _achievement_at(
    views: Sequence[JobView], curves: dict[str, FloatArray], gpus: npt.NDArray[np.int64]
) -> FloatArray:
    """:func:`_achievement` of every job (rows) on each GPU count of ``gpus`` (columns)."""
    rows = [curves[v.name] for v in views]
    lengths = np.array([len(c) for c in rows], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    tops = np.array([float(c.max()) for c in rows])
    flat = np.concatenate(rows)
    at = flat[offsets[:, None] + np.minimum(gpus[None, :], lengths[:, None] - 1)]
    safe = np.where(tops > 0, tops, 1.0)
    return np.where(tops[:, None] > 0, at / safe[:, None], 0.0)


def _per_gpu(curve: FloatArray, gpus: int) -> float:
    """Goodput per GPU on ``gpus`` over the best goodput per GPU."""
    if gpus <= 0 or len(curve) < 2:
        return 0.0
    per = curve[1:] / np.arange(1, len(curve))
    top = float(per.max())
    return _at(curve, gpus) / gpus / top if top > 0 else 0.0
