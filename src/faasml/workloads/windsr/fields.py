"""Seeded synthetic wind fields over generated terrain, and WindSR's (LR, terrain, obs, HR) patches.

Stand-in for the chapter's data (WTK-LED WRF 100 m wind speed, WRF terrain height, HRRR
observations; dissertation Chapter 6, §6.1.2, Table 6.1), so that the workload needs no
download. One patch of ``size`` × ``size`` high-resolution cells is made as follows:

- **terrain** ``h`` (m): a Gaussian random field with power spectral density ∝ k^-4 (a rough,
  fractal landscape), scaled to a relief (standard deviation) drawn log-uniformly in
  [20, 600] m per patch, above a base elevation;
- **turbulent wind**: a Gaussian random field with 2-D spectral density ∝ k^-8/3, i.e. the
  Kolmogorov energy spectrum E(k) ∝ k^-5/3 of its 1-D transects, of standard deviation
  ``turbulence`` m/s, around a mean speed U₀ drawn in [4, 12] m/s;
- **terrain speed-up**: the simulated ("WRF") 100 m speed is
  ``s = (U₀ + u') · (1 + speedup · h' / 300 m)``, with h' the terrain minus its Gaussian-smoothed
  self (σ = 2 cells): wind speeds up over crests and slows in valleys (Jackson–Hunt: the
  fractional speed-up of a low hill is of order its height over its length), which is the fine
  structure that the low-resolution field cannot show and the terrain channel can;
- **low resolution**: ``s`` block-averaged over ``scale`` × ``scale`` cells;
- **truth and stations** (the "HRRR" proxy of §6.1.2): ``truth = s + b`` with b a smooth
  model-bias field (spectral density ∝ k^-6, standard deviation ``bias`` m/s), and
  ``stations`` observation sites per patch at random cells reading ``truth`` plus Gaussian
  noise of ``obs_noise`` m/s.

Every field is drawn on a grid twice the patch size and cropped, so patches are not periodic.
Same arguments, same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml._validate import MAX_DATA_VALUES, check_size, count_text, shown
from faasml.exceptions import WorkloadError
from faasml.workloads._dataset import Dataset

Array = NDArray[np.float32]

CHANNELS = ("hr", "lr", "terrain", "truth", "obs", "mask")
"""The channels of a WindSR sample as a ``Dataset`` holds it, shape (6, size, size):
``hr`` simulated speed (m/s), ``lr`` the low-resolution speed repeated over its blocks (m/s),
``terrain`` height (m), ``truth`` observed-truth speed (m/s), ``obs`` station readings (m/s,
0 elsewhere), ``mask`` 1 at stations, 0 elsewhere."""

SPEEDUP_LENGTH_M = 300.0
"""Terrain height (m) over which the fractional speed-up equals ``speedup``."""

COMPLEX_TERRAIN_M = 150.0
"""Relief (terrain standard deviation, m) above which a patch is labelled complex (class 1)."""

_TURBULENCE_BETA = 8.0 / 3.0  # 2-D spectral density slope of a k^-5/3 energy spectrum
_TERRAIN_BETA = 4.0
_BIAS_BETA = 6.0


@dataclass(frozen=True, eq=False)
class WindPatches:
    """``n`` patches as arrays: ``hr``, ``terrain``, ``truth`` (n, size, size); ``lr``
    (n, size/scale, size/scale); station cells ``rows``/``cols`` (n, k, int64) and readings
    ``readings`` (n, k) in m/s."""

    hr: Array
    lr: Array
    terrain: Array
    truth: Array
    rows: NDArray[np.int64]
    cols: NDArray[np.int64]
    readings: Array

    def __post_init__(self) -> None:
        n, size = self.hr.shape[0], self.hr.shape[-1]
        checks: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
            "terrain": (self.terrain.shape, self.hr.shape),
            "truth": (self.truth.shape, self.hr.shape),
            "cols": (self.cols.shape, self.rows.shape),
            "readings": (self.readings.shape, self.rows.shape),
        }
        if self.hr.ndim != 3 or self.hr.shape[1] != size:
            raise WorkloadError(f"hr must have shape (n, size, size), got {self.hr.shape}")
        for name, (got, want) in checks.items():
            if got != want:
                raise WorkloadError(f"{name} must have shape {want}, got {got}")
        if self.lr.ndim != 3 or self.lr.shape[0] != n or self.lr.shape[1] != self.lr.shape[2]:
            raise WorkloadError(f"lr must have shape (n, m, m), got {self.lr.shape}")
        if self.lr.shape[1] < 1 or size % self.lr.shape[1]:
            raise WorkloadError(
                f"lr of side {self.lr.shape[1]} must divide the hr side {size} evenly"
            )
        if self.rows.ndim != 2 or self.rows.shape[0] != n:
            raise WorkloadError(f"station rows must have shape (n, k), got {self.rows.shape}")
        for name, cells in (("rows", self.rows), ("cols", self.cols)):
            if cells.size and (cells.min() < 0 or cells.max() >= size):
                raise WorkloadError(f"station {name} must lie in [0, {size}), got {cells.max()}")

    def __len__(self) -> int:
        return int(self.hr.shape[0])

    @property
    def size(self) -> int:
        return int(self.hr.shape[-1])

    @property
    def scale(self) -> int:
        return self.size // int(self.lr.shape[-1])

    def mask(self) -> Array:
        """1 at station cells, 0 elsewhere, (n, size, size)."""
        out = np.zeros_like(self.hr)
        index = np.arange(len(self))[:, None]
        out[index, self.rows, self.cols] = 1.0
        return out

    def obs_image(self) -> Array:
        """Station readings at their cells, 0 elsewhere, (n, size, size)."""
        out = np.zeros_like(self.hr)
        index = np.arange(len(self))[:, None]
        out[index, self.rows, self.cols] = self.readings
        return out

    def to_dataset(self) -> Dataset:
        """The patches as a faasml ``Dataset``: features (n, 6, size, size) in ``CHANNELS``
        order; labels 1 for complex terrain (relief > ``COMPLEX_TERRAIN_M``), else 0 (only
        to stratify; the WindSR models ignore them)."""
        lr_up = np.repeat(np.repeat(self.lr, self.scale, axis=1), self.scale, axis=2)
        features = np.stack(
            [self.hr, lr_up, self.terrain, self.truth, self.obs_image(), self.mask()], axis=1
        )
        relief = self.terrain.reshape(len(self), -1).std(axis=1)
        labels = (relief > COMPLEX_TERRAIN_M).astype(np.int64)
        return Dataset(features.astype(np.float32), labels, 2)


def patches_from_dataset(data: Dataset, scale: int) -> WindPatches:
    """The patches a ``to_dataset`` record holds (stations: the cells its mask marks)."""
    features = np.asarray(data.features)
    if features.ndim != 4 or features.shape[1] != len(CHANNELS):
        raise WorkloadError(
            f"WindSR samples must have shape (n, {len(CHANNELS)}, size, size) with channels "
            f"{', '.join(CHANNELS)}, got {features.shape}"
        )
    n, size = features.shape[0], features.shape[-1]
    if size % scale:
        raise WorkloadError(f"the scale {scale} must divide the patch size {size}")
    masks = features[:, 5] > 0.5
    counts = masks.reshape(n, -1).sum(axis=1)
    k = int(counts.min()) if n else 0
    rows = np.zeros((n, k), dtype=np.int64)
    cols = np.zeros((n, k), dtype=np.int64)
    for i in range(n):
        r, c = np.nonzero(masks[i])
        rows[i], cols[i] = r[:k], c[:k]
    readings = features[np.arange(n)[:, None], 4, rows, cols]
    return WindPatches(
        hr=features[:, 0].copy(),
        lr=features[:, 1, ::scale, ::scale].copy(),
        terrain=features[:, 2].copy(),
        truth=features[:, 3].copy(),
        rows=rows,
        cols=cols,
        readings=readings.astype(np.float32),
    )


def coarsen(field: NDArray[Any], scale: int) -> Array:
    """Block means of ``scale`` × ``scale`` cells over the last two axes."""
    *lead, h, w = field.shape
    blocks = np.asarray(field, dtype=np.float64).reshape(
        *lead, h // scale, scale, w // scale, scale
    )
    return blocks.mean(axis=(-3, -1)).astype(np.float32)


def gaussian_field(rng: np.random.Generator, n: int, side: int, beta: float) -> NDArray[np.float64]:
    """``n`` zero-mean, unit-variance Gaussian random fields (side × side, periodic) with
    isotropic power spectral density ∝ |k|^-beta (the k = 0 mode removed)."""
    ky = np.fft.fftfreq(side)[:, None]
    kx = np.fft.rfftfreq(side)[None, :]
    k = np.hypot(ky, kx)
    amplitude = np.zeros_like(k)
    amplitude[k > 0] = k[k > 0] ** (-beta / 2)
    noise = rng.normal(size=(n, side, side))
    field = np.fft.irfft2(np.fft.rfft2(noise) * amplitude, s=(side, side))
    field -= field.mean(axis=(1, 2), keepdims=True)
    field /= field.std(axis=(1, 2), keepdims=True) + 1e-12
    return field


def smooth(field: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
    """Periodic Gaussian smoothing (standard deviation ``sigma`` cells) over the last two axes."""
    side = field.shape[-1]
    ky = np.fft.fftfreq(side)[:, None]
    kx = np.fft.rfftfreq(side)[None, :]
    gain = np.exp(-2 * (np.pi * sigma) ** 2 * (kx**2 + ky**2))
    return np.fft.irfft2(np.fft.rfft2(field) * gain, s=field.shape[-2:])


def radial_spectrum(field: NDArray[Any]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(wavenumbers, mean power) of the 2-D power spectrum of square fields (..., n, n),
    averaged over rings of integer |k| (in cycles per patch) and over leading axes."""
    side = field.shape[-1]
    data = np.asarray(field, dtype=np.float64)
    data = data - data.mean(axis=(-2, -1), keepdims=True)
    power = np.abs(np.fft.fft2(data)) ** 2
    power = power.reshape(-1, side, side).mean(axis=0)
    ky = np.fft.fftfreq(side, 1.0 / side)[:, None]
    kx = np.fft.fftfreq(side, 1.0 / side)[None, :]
    ring = np.rint(np.hypot(ky, kx)).astype(int)
    ks = np.arange(1, side // 2)
    mean = np.array([power[ring == k].mean() for k in ks])
    return ks.astype(np.float64), mean


def _positive_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WorkloadError(
            f"the value of dataset.{name} is {shown(value)}, but must be an integer >= {minimum}"
        )
    return value


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise WorkloadError(
            f"the value of dataset.{name} is {shown(value)}, but must be a number >= 0"
        )
    return float(value)


def generate_patches(
    samples: int,
    size: int = 32,
    scale: int = 4,
    stations: int = 4,
    turbulence: float = 1.0,
    speedup: float = 1.0,
    bias: float = 1.0,
    obs_noise: float = 0.1,
    seed: int = 0,
) -> WindPatches:
    """``samples`` WindSR patches of ``size`` × ``size`` cells (see the module docstring)."""
    n = _positive_int("samples", samples, 1)
    side = _positive_int("size", size, 8)
    factor = _positive_int("scale", scale, 2)
    k = _positive_int("stations", stations, 0)
    if side % factor:
        raise WorkloadError(
            f"the value of dataset.size is {side}, but must be a multiple of dataset.scale "
            f"({factor})"
        )
    if k > side * side:
        raise WorkloadError(
            f"the value of dataset.stations is {k}, but a {side}×{side} patch has "
            f"{side * side} cells"
        )
    amounts = {
        name: _non_negative(name, value)
        for name, value in (
            ("turbulence", turbulence),
            ("speedup", speedup),
            ("bias", bias),
            ("obs_noise", obs_noise),
        )
    }
    check_size(
        "one sample of dataset 'wind-sr'", 6 * side * side, 1_000_000, "values", WorkloadError
    )
    check_size(
        f"dataset 'wind-sr' (samples {count_text(n)} × 6 × size² {count_text(side)}²)",
        n * 6 * side * side,
        MAX_DATA_VALUES,
        "values",
        WorkloadError,
    )
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 17])
    big = 2 * side
    chunks = [
        _chunk(rng, min(256, n - start), side, big, factor, k, amounts)
        for start in range(0, n, 256)
    ]
    return WindPatches(*(np.concatenate(parts) for parts in zip(*chunks, strict=True)))


def _chunk(
    rng: np.random.Generator,
    n: int,
    side: int,
    big: int,
    factor: int,
    k: int,
    amounts: dict[str, float],
) -> tuple[Array, Array, Array, Array, NDArray[np.int64], NDArray[np.int64], Array]:
    crop = (slice(None), slice(0, side), slice(0, side))
    relief = np.exp(rng.uniform(np.log(20.0), np.log(600.0), size=(n, 1, 1)))
    base = rng.uniform(0.0, 1500.0, size=(n, 1, 1))
    whole = gaussian_field(rng, n, big, _TERRAIN_BETA)
    shape = whole[crop]
    mean = shape.mean(axis=(1, 2), keepdims=True)
    spread = shape.std(axis=(1, 2), keepdims=True) + 1e-12
    whole = np.maximum(base + relief * (whole - mean) / spread, 0.0)
    terrain = whole[crop]
    # Smoothed on the whole (periodic) grid, then cropped: no wrap-around at the patch edges.
    detail = (whole - smooth(whole, 2.0))[crop]
    mean_speed = rng.uniform(4.0, 12.0, size=(n, 1, 1))
    turbulent = amounts["turbulence"] * gaussian_field(rng, n, big, _TURBULENCE_BETA)[crop]
    gain = np.clip(1.0 + amounts["speedup"] * detail / SPEEDUP_LENGTH_M, 0.3, 2.5)
    speed = np.maximum((mean_speed + turbulent) * gain, 0.1)
    truth = speed + amounts["bias"] * gaussian_field(rng, n, big, _BIAS_BETA)[crop]
    truth = np.maximum(truth, 0.0)
    cells = np.stack([rng.choice(side * side, size=k, replace=False) for _ in range(n)])
    rows, cols = (cells // side).astype(np.int64), (cells % side).astype(np.int64)
    index = np.arange(n)[:, None]
    readings = truth[index, rows, cols] + amounts["obs_noise"] * rng.normal(size=(n, k))
    return (
        speed.astype(np.float32),
        coarsen(speed, factor),
        terrain.astype(np.float32),
        truth.astype(np.float32),
        rows,
        cols,
        np.maximum(readings, 0.0).astype(np.float32),
    )


def wind_sr(
    samples: int,
    size: int = 32,
    scale: int = 4,
    stations: int = 4,
    turbulence: float = 1.0,
    speedup: float = 1.0,
    bias: float = 1.0,
    obs_noise: float = 0.1,
    seed: int = 0,
) -> Dataset:
    """The ``wind-sr`` generator of job files: ``generate_patches(...).to_dataset()``."""
    return generate_patches(
        samples, size, scale, stations, turbulence, speedup, bias, obs_noise, seed
    ).to_dataset()
