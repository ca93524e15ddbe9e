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
``strength`` s scales the weight (x = s·m ⊙ x_obs + (1 − s·m) ⊙ x_sim; 1, the chapter's, by
default). ``Assimilation`` is how a run evaluates and ``faasml predict`` applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml._validate import Fields, shown
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
    strength: float = 1.0,
    **thresholds: Any,
) -> Array:
    """Eq. 6.4 for a batch: x = s·m ⊙ x_obs + (1 − s·m) ⊙ x_sim, arrays (n, size, size) and
    stations (n, k); s = ``strength``."""
    sims = np.asarray(simulation, dtype=np.float32)
    out = np.empty_like(sims)
    for i in range(sims.shape[0]):
        m, x_obs = soft_mask_and_innovation(
            sims[i], terrain[i], rows[i], cols[i], readings[i], radius, **thresholds
        )
        m = m * np.float32(strength)
        out[i] = m * x_obs + (1 - m) * sims[i]
    return out


STATIONS_RULE = (
    "must be 'data' (the dataset's own stations), a number of stations to place per patch, "
    "or a stations file (docs/windsr.md)"
)


@dataclass(frozen=True)
class Assimilation:
    """How station observations are assimilated when a run evaluates (the ``assimilate``
    option of the WindSR models, from a job's ``assimilate:`` section)."""

    stations: str | int | tuple[tuple[int, int], ...] = "data"
    """'data': the stations the samples carry; a count: that many seeded cells per patch
    reading the truth field; cells (row, col): a station network, reading the truth there."""
    radius: str | int = "dynamic"
    """'dynamic' (Algorithm 1) or a fixed impact radius in cells."""
    strength: float = 1.0
    """The in-painting strength s in (0, 1]: the soft-bleed weight is s·m."""
    inpaint: bool = True
    """Also in-paint the station cells while sampling (WindSR only)."""

    def option(self) -> dict[str, Any]:
        """The model option (plain values) that ``read_assimilation`` reads back."""
        stations = (
            [list(c) for c in self.stations]
            if isinstance(self.stations, tuple)
            else (self.stations)
        )
        return {
            "stations": stations,
            "radius": self.radius,
            "strength": self.strength,
            "inpaint": self.inpaint,
        }


def read_assimilation(value: Any, where: str) -> Assimilation:
    """An ``Assimilation`` from a mapping; a bad field raises one line naming ``where.field``."""
    f = Fields(value, where, WorkloadError)
    stations = f.raw("stations", "data")
    if isinstance(stations, list):
        stations = tuple(_cell(f.path("stations"), cell) for cell in stations)
        if not stations:
            raise f.fail("stations", [], STATIONS_RULE)
    elif isinstance(stations, bool) or not (
        stations == "data" or (isinstance(stations, int) and 1 <= stations <= 10_000)
    ):
        raise f.fail("stations", stations, STATIONS_RULE)
    radius = f.raw("radius", "dynamic")
    if radius != "dynamic" and (
        isinstance(radius, bool) or not isinstance(radius, int) or not 1 <= radius <= 64
    ):
        raise f.fail("radius", radius, "must be 'dynamic' or a whole number of cells in [1, 64]")
    strength = f.number("strength", 1.0, minimum=0.0, maximum=1.0, strict_minimum=True)
    result = Assimilation(stations, radius, strength, f.boolean("inpaint", True))
    f.finish()
    return result


def _cell(where: str, cell: Any) -> tuple[int, int]:
    if (
        not isinstance(cell, list | tuple)
        or len(cell) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in cell)
    ):
        raise WorkloadError(
            f"the value of {where} holds {shown(cell)}, but a station cell is [row, col] with "
            "whole numbers >= 0"
        )
    return int(cell[0]), int(cell[1])


def stations_for(
    setting: Assimilation,
    truth: NDArray[Any],
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    readings: NDArray[Any],
    seed: int = 0,
) -> tuple[NDArray[np.int64], NDArray[np.int64], Array]:
    """The stations (rows, cols, readings), each (n, k), that ``setting`` assimilates into
    patches whose truth fields are ``truth`` (n, size, size) and own stations ``rows`` ..."""
    n, size = truth.shape[0], truth.shape[-1]
    if setting.stations == "data":
        return rows, cols, np.asarray(readings, dtype=np.float32)
    if isinstance(setting.stations, int):
        if setting.stations > size * size:
            raise WorkloadError(
                f"the value of assimilate.stations is {setting.stations}, but a {size}×{size} "
                f"patch has {size * size} cells"
            )
        rng = np.random.default_rng([seed, 29])
        cells = np.stack(
            [rng.choice(size * size, setting.stations, replace=False) for _ in range(n)]
        )
        new_rows, new_cols = cells // size, cells % size
    else:
        grid = np.asarray(setting.stations, dtype=np.int64)
        if int(grid.max()) >= size:
            raise WorkloadError(
                f"the stations of assimilate.stations reach cell {int(grid.max())}, but the "
                f"patches have {size}×{size} cells"
            )
        new_rows = np.broadcast_to(grid[:, 0], (n, len(grid))).copy()
        new_cols = np.broadcast_to(grid[:, 1], (n, len(grid))).copy()
    index = np.arange(n)[:, None]
    values = np.asarray(truth, dtype=np.float32)[index, new_rows, new_cols]
    return new_rows.astype(np.int64), new_cols.astype(np.int64), values
