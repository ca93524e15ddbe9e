"""Plots of a scavenging replay: idle nodes vs nodes used over time, and node counts of a
few jobs over time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faasml._imports import optional_import
from faasml.cluster.scavenge.metrics import ScavengeResult


def plot_scavenge(results: Sequence[ScavengeResult], directory: Path, jobs: int = 4) -> list[Path]:
    """Write ``nodes_used.png`` and ``job_nodes.png`` (the first policy's first ``jobs``
    jobs) into ``directory``; return their paths."""
    matplotlib = optional_import("matplotlib", extra="plot")
    matplotlib.use("Agg")
    plt = optional_import("matplotlib.pyplot", extra="plot")
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "nodes_used.png", directory / "job_nodes.png"]

    fig, ax = plt.subplots(figsize=(8, 4))
    if results and results[0].timeline:
        t, pool, _ = zip(*results[0].timeline, strict=True)
        ax.step(np.array(t) / 3600.0, pool, where="post", color="0.6", label="idle nodes")
    for result in results:
        if result.timeline:
            t, _, used = zip(*result.timeline, strict=True)
            ax.step(np.array(t) / 3600.0, used, where="post", linewidth=0.8, label=result.policy)
    ax.set_xlabel("time (h)")
    ax.set_ylabel("nodes")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    if results:
        first = results[0]
        for name in sorted(first.job_history)[:jobs]:
            history = first.job_history[name]
            if history:
                t, n = zip(*history, strict=True)
                ax.step(np.array(t) / 3600.0, n, where="post", label=name)
        ax.set_title(f"{first.policy}: nodes per job")
    ax.set_xlabel("time (h)")
    ax.set_ylabel("nodes")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(paths[1], dpi=120)
    plt.close(fig)
    return paths
