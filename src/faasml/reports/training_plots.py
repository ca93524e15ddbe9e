"""Plots of a simulated or real training run: the loss fit, and the allocation over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from faasml._imports import optional_import
from faasml.exceptions import FaasmlError
from faasml.models.convergence import fit_loss_curve
from faasml.sim.training import TrainingRun


def plot_training_run(run: TrainingRun, directory: str | Path) -> list[Path]:
    """Write ``<policy>-loss.png`` (observed losses, the final online fit, the target) and
    ``<policy>-allocation.png`` (functions, memory and spend over time); returns the paths."""
    matplotlib = optional_import("matplotlib", "plot")
    matplotlib.use("Agg")
    plt = optional_import("matplotlib.pyplot", "plot")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    epochs = np.array([r.epoch for r in run.records], dtype=float)
    losses = np.array([r.loss for r in run.records], dtype=float)

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(epochs, losses, "o", ms=3, label="observed loss")
    if epochs.size >= 3:
        fit = fit_loss_curve(epochs, losses)
        try:
            horizon = max(float(epochs.max()), fit.epochs_to_reach(run.target_loss).epochs)
        except FaasmlError:
            horizon = float(epochs.max())
        grid = np.linspace(0.0, min(horizon * 1.1, 10 * float(epochs.max())), 200)
        ax.plot(grid, fit.predict(grid), "-", label=f"online fit ({fit.family})")
    ax.axhline(run.target_loss, color="grey", ls="--", label="target loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    ax.set_title(f"{run.workload}: loss and fit ({run.policy})")
    ax.legend()
    loss_path = out / f"{run.policy}-loss.png"
    fig.tight_layout()
    fig.savefig(loss_path, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    times = np.array([0.0] + [r.elapsed_s for r in run.records])
    functions = [run.start.n] + [r.allocation.n for r in run.records]
    memory = [run.start.memory_mb] + [r.allocation.memory_mb for r in run.records]
    ax.step(times, functions, where="pre", label="functions")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("functions")
    twin = ax.twinx()
    twin.step(times, memory, where="pre", color="tab:orange", label="memory (MB)")
    twin.plot(
        times[1:], [r.spent_usd * 1000 for r in run.records], color="tab:green", label="spend (m$)"
    )
    twin.set_ylabel("memory (MB) / spend (m$)")
    ax.set_title(f"{run.workload}: allocation over time ({run.policy})")
    fig.legend(loc="upper right")
    alloc_path = out / f"{run.policy}-allocation.png"
    fig.tight_layout()
    fig.savefig(alloc_path, dpi=110)
    plt.close(fig)
    return [loss_path, alloc_path]
