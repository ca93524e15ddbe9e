"""Image-quality metrics of WindSR (dissertation Chapter 6, §6.3): PSNR and SSIM from
scikit-image, error at observation sites.

PSNR and SSIM are per patch with the data range of the reference patch (max − min, m/s), as a
patch of wind speed has no fixed pixel range; SSIM uses the settings of Wang et al. (2004):
an 11×11 Gaussian window of σ = 1.5, population covariances, K₁ = 0.01, K₂ = 0.03
(scikit-image's ``gaussian_weights=True, use_sample_covariance=False``). Reported figures are
means over patches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from faasml._imports import optional_import
from faasml.exceptions import WorkloadError


def _pair(reference: NDArray[Any], estimate: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    if ref.shape != est.shape or ref.ndim != 3:
        raise WorkloadError(
            f"metrics need two stacks of patches (n, y, x) of one shape, got {ref.shape} "
            f"and {est.shape}"
        )
    return ref, est


def psnr(reference: NDArray[Any], estimate: NDArray[Any]) -> float:
    """Mean PSNR (dB) of patches (n, y, x) against their references."""
    metrics = optional_import("skimage.metrics", "windsr")
    ref, est = _pair(reference, estimate)
    values = [
        metrics.peak_signal_noise_ratio(r, e, data_range=max(float(np.ptp(r)), 1e-6))
        for r, e in zip(ref, est, strict=True)
    ]
    return float(np.mean(values))


def ssim(reference: NDArray[Any], estimate: NDArray[Any]) -> float:
    """Mean SSIM of patches (n, y, x) against their references (Wang et al. settings)."""
    metrics = optional_import("skimage.metrics", "windsr")
    ref, est = _pair(reference, estimate)
    values = [
        metrics.structural_similarity(
            r,
            e,
            data_range=max(float(np.ptp(r)), 1e-6),
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
        )
        for r, e in zip(ref, est, strict=True)
    ]
    return float(np.mean(values))


def site_error(
    estimate: NDArray[Any],
    rows: NDArray[np.integer[Any]],
    cols: NDArray[np.integer[Any]],
    readings: NDArray[Any],
) -> tuple[float, float]:
    """(MAE, RMSE) in m/s of fields (n, y, x) at station cells (n, k) against the readings."""
    field = np.asarray(estimate, dtype=np.float64)
    if rows.size == 0:
        return float("nan"), float("nan")
    values = field[np.arange(field.shape[0])[:, None], rows, cols]
    error = values - np.asarray(readings, dtype=np.float64)
    return float(np.abs(error).mean()), float(np.sqrt((error**2).mean()))


def away_from_sites(
    reference: NDArray[Any],
    rows: NDArray[np.integer[Any]],
    cols: NDArray[np.integer[Any]],
    radius: int,
) -> NDArray[np.bool_]:
    """Mask (n, y, x) of the cells farther than ``radius`` from every station."""
    n, height, width = np.asarray(reference).shape
    ys, xs = np.ogrid[:height, :width]
    far = np.ones((n, height, width), dtype=bool)
    for i in range(n):
        for r, c in zip(rows[i].tolist(), cols[i].tolist(), strict=True):
            far[i] &= (ys - r) ** 2 + (xs - c) ** 2 > radius * radius
    return far


def rmse(
    reference: NDArray[Any], estimate: NDArray[Any], where: NDArray[np.bool_] | None = None
) -> float:
    """Root-mean-square error (m/s), over ``where`` when given."""
    ref, est = _pair(reference, estimate)
    diff = (est - ref) ** 2
    return float(np.sqrt(diff[where].mean() if where is not None else diff.mean()))
