"""The global batch: which rows each function trains on in each round, whatever n is.

The batch size a user states is the *global* batch B. An epoch over D rows has
q = max(1, ⌊D/B⌋) rounds. The rows are cut into B contiguous strata (sizes differ by at most
one, as ``partition`` cuts them); round r of epoch e takes, from every stratum, the row whose
seeded rank in that stratum is r, and the last round also takes the ranks ≥ q (the D mod B
rows left over join the epoch's last batch). So a round's rows depend only on (seed, epoch,
D, B), never on how many functions train: function i of n trains on the rows of each round
that lie in its contiguous partition (``partition(dataset, i, n)``), about B/n of them, and
the weighted mean of the n gradients (``share``) is the gradient of the whole global batch.
Each function therefore reads only its own partition, and every function has at least one
row in every round while n ≤ B/2 (each partition then holds a whole stratum).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from faasml import workload
from faasml.exceptions import WorkloadError


def rounds_per_epoch(samples: int, batch_size: int) -> int:
    """q = max(1, ⌊D/B⌋): the epoch's rounds (its last batch holds the D mod B rows left)."""
    _check(samples, batch_size)
    return workload.rounds_per_epoch(samples, batch_size)


def round_sizes(samples: int, batch_size: int) -> NDArray[np.int64]:
    """b_r, the rows of each round of an epoch: B, …, B, B + D mod B (D when D < B)."""
    rounds = rounds_per_epoch(samples, batch_size)
    sizes = np.full(rounds, min(batch_size, samples), dtype=np.int64)
    sizes[-1] = samples - (rounds - 1) * batch_size
    return sizes


def part_rounds(
    samples: int, batch_size: int, *, seed: int, epoch: int, start: int, stop: int
) -> list[NDArray[np.int64]]:
    """The rows in [start, stop) that each round of ``epoch`` trains on (global row indices,
    in stratum order); depends only on (seed, epoch, samples, batch_size) and the range."""
    _check(samples, batch_size)
    if not 0 <= start <= stop <= samples:
        raise WorkloadError(f"the rows [{start}, {stop}) are not within [0, {samples})")
    if epoch < 0:
        raise WorkloadError(f"the value of epoch is {epoch}, but must be >= 0")
    rounds = rounds_per_epoch(samples, batch_size)
    if start == stop:
        return [np.empty(0, dtype=np.int64) for _ in range(rounds)]
    bounds = _stratum_bounds(samples, batch_size)
    # The strata that overlap [start, stop): their rows are ranked whole.
    first = int(np.searchsorted(bounds, start, side="right")) - 1
    last = int(np.searchsorted(bounds, stop - 1, side="right")) - 1
    lo, hi = int(bounds[first]), int(bounds[last + 1])
    keys = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch)]).random(samples)[lo:hi]
    sizes = np.diff(bounds[first : last + 2])
    stratum = np.repeat(np.arange(first, last + 1), sizes)
    order = np.lexsort((keys, stratum))
    ranks = np.empty(hi - lo, dtype=np.int64)
    ranks[order] = np.arange(hi - lo) - (bounds[stratum[order]] - lo)
    rows = np.arange(lo, hi, dtype=np.int64)
    inside = (rows >= start) & (rows < stop)
    rows, ranks, stratum = rows[inside], np.minimum(ranks[inside], rounds - 1), stratum[inside]
    by_round = np.lexsort((stratum, ranks))
    counts = np.bincount(ranks, minlength=rounds)
    return list(np.split(rows[by_round], np.cumsum(counts)[:-1]))


def share(count: int, n: int, round_size: int) -> float:
    """The factor c·n/b that scales a function's mean gradient over its c rows of a b-row round,
    so that the plain mean of the n functions' vectors is the global batch's mean gradient."""
    return count * n / round_size if round_size else 0.0


def max_functions(batch_size: int) -> int:
    """The most functions a trial can use with global batch B: ⌊B/2⌋ (at least 1), so that each
    function holds a whole stratum and trains on at least one row of every round."""
    return workload.max_functions(batch_size)


def _stratum_bounds(samples: int, batch_size: int) -> NDArray[np.int64]:
    base, extra = divmod(samples, batch_size)
    sizes = np.full(batch_size, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _check(samples: int, batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise WorkloadError(
            f"the value of batch_size is {batch_size!r}, but must be an integer >= 1"
        )
    if samples < 1:
        raise WorkloadError(f"the value of samples is {samples}, but must be >= 1")
