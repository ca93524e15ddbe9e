"""Plots of a cluster simulation: CDF of JCT (FaPES Fig. 13) and utilisation over time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faasml._imports import optional_import
from faasml.cluster.metrics import SimResult


def plot_results(results: Sequence[SimResult], directory: Path) -> list[Path]:
    """Write ``jct_cdf.png`` and ``utilization.png`` into ``directory``; return their paths."""
    matplotlib = optional_import("matplotlib", extra="plot")
    matplotlib.use("Agg")
    plt = optional_import("matplotlib.pyplot", extra="plot")
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "jct_cdf.png", directory / "utilization.png"]

    fig, ax = plt.subplots(figsize=(6, 4))
    for result in results:
        jcts = np.sort([j.jct for j in result.jobs if j.jct is not None])
        if len(jcts):
            ax.step(
                jcts / 1000.0,
                np.arange(1, len(jcts) + 1) / len(jcts),
                where="post",
                label=result.policy,
            )
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (×1000 s)")
    ax.set_ylabel("CDF")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for result in results:
        if result.utilization:
            t, u = zip(*result.utilization, strict=True)
            # A point holds until the next one (idle rounds before an arrival are one point).
            ax.step(np.array(t) / 3600.0, u, where="post", label=result.policy, linewidth=1)
    ax.set_xlabel("time (h)")
    ax.set_ylabel("GPUs allocated / GPUs")
    ax.set_ylim(0, 1.05)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(paths[1], dpi=120)
    plt.close(fig)
    return paths
