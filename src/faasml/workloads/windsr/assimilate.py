"""Data assimilation by in-painting: the dynamic impact radius (Algorithm 1) and the soft-bleed
composite (Eq. 6.4) of dissertation Chapter 6, §6.2.3.

For each station p the impact radius r grows from ``min_radius`` by one cell while the
standard deviations of the terrain height (σ_h) and of the simulated speed (σ_s) over the disc
of radius r stay below the thresholds T₁ and T₂, up to ``max_radius`` (Algorithm 1; flat,
steady surroundings let one observation speak for a larger area). The observation image
x_obs is the simulation plus the station's innovation (reading − simulation at p) around each
station, and a Gaussian soft-bleed weight m = exp(−d² / (2 (r/2)²)) for d ≤ r (0 beyond;
the largest weight where discs overlap) blends it in (Eq. 6.4):

    x = m ⊙ x_obs + (1 − m) ⊙ x_sim

so the composite equals the reading at the station and fades to the simulation at r.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import WorkloadError

Array = NDArray[np.float32]


def dynamic_radius(
    terrain: NDArray[Any],
    speed: NDArray[Any],
    row: int,
    col: int,
    terrain_threshold: float = 50.0,
    speed_threshold: float = 0.5,
    min_radius: int = 1,
    max_radius: int = 6,
) -> int:
    """Algorithm 1 (DIR): the impact radius, in cells, of a station at (row, col)."""
    if min_radius < 1 or max_radius < min_radius:
        raise WorkloadError(
            f"the radius bounds are {min_radius}..{max_radius}, but must satisfy "
            "1 <= min_radius <= max_radius"
        )
    height, width = speed.shape
    ys, xs = np.ogrid[:height, :width]
    distance2 = (ys - row) ** 2 + (xs - col) ** 2
    radius = min_radius
    while radius < max_radius:
        disc = distance2 <= radius * radius
        if terrain[disc].std() < terrain_threshold and speed[disc].std() < speed_threshold:
            radius += 1
        else:
            break
    return radius


def soft_mask_and_innovation(
    simulation: NDArray[Any],
    terrain: NDArray[Any],
    rows: NDArray[np.integer[Any]],
    cols: NDArray[np.integer[Any]],
    readings: NDArray[Any],
    radius: int | None = None,
    **thresholds: Any,
) -> tuple[Array, Array]:
    """(m, x_obs) of one patch: the soft-bleed weights and the observation image.

    ``radius`` fixes every station's radius (the chapter's fixed-radius rows of Table 6.3);
    None uses ``dynamic_radius`` with ``thresholds``.
    """
    height, width = simulation.shape
    ys, xs = np.ogrid[:height, :width]
    weight = np.zeros((height, width), dtype=np.float64)
    innovation = np.zeros((height, width), dtype=np.float64)
    for row, col, reading in zip(
        rows.tolist(), cols.tolist(), np.asarray(readings).tolist(), strict=True
    ):
        r = (
            radius
            if radius is not None
            else dynamic_radius(terrain, simulation, row, col, **thresholds)
        )
        d2 = (ys - row) ** 2 + (xs - col) ** 2
        sigma = max(r / 2.0, 0.5)
        m = np.where(d2 <= r * r, np.exp(-d2 / (2 * sigma * sigma)), 0.0)
        wins = m > weight
        weight = np.where(wins, m, weight)
        innovation = np.where(wins, reading - float(simulation[row, col]), innovation)
    x_obs = simulation + innovation
    return weight.astype(np.float32), x_obs.astype(np.float32)


def composite(
    simulation: NDArray[Any],
    terrain: NDArray[Any],
    rows: NDArray[np.integer[Any]],
    cols: NDArray[np.integer[Any]],
    readings: NDArray[Any],
    radius: int | None = None,
    **thresholds: Any,
) -> Array:
    """Eq. 6.4 for a batch: x = m ⊙ x_obs + (1 − m) ⊙ x_sim, arrays (n, size, size) and
    stations (n, k)."""
    sims = np.asarray(simulation, dtype=np.float32)
    out = np.empty_like(sims)
    for i in range(sims.shape[0]):
        m, x_obs = soft_mask_and_innovation(
            sims[i], terrain[i], rows[i], cols[i], readings[i], radius, **thresholds
        )
        out[i] = m * x_obs + (1 - m) * sims[i]
    return out
