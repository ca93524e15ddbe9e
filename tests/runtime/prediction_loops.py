"""Training loops the first-prediction tests run (shipped to the functions by value)."""

from __future__ import annotations

import sys
import time
from typing import Any

import torch

_G = torch.Generator().manual_seed(3)
X = torch.randn(64, 3, generator=_G)
Y = X @ torch.tensor([[0.5], [-1.0], [2.0]])
SETUP_S = 3.0
"""What a fresh function's first call of ``slow_start_loop`` takes before its first round."""


def _train(config: dict[str, Any], ctx: Any, loss_at: Any) -> None:
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    model, opt = ctx.prepare(model, opt)
    if ctx.checkpoint:
        model.load_state_dict(ctx.checkpoint["model"])
    train = ctx.shard((X, Y))
    for epoch in ctx.epochs():
        for x, y in ctx.batches(train):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        ctx.report({"loss": loss_at(epoch, model)}, checkpoint={"model": model.state_dict()})


def curve_loop(config: dict[str, Any], ctx: Any) -> None:
    """Trains a linear model, but reports the loss 2 / epoch (1-based) whatever data it sees:
    a curve whose epochs to any target are known."""
    _train(config, ctx, lambda epoch, _: 2.0 / (epoch + 1))


def slow_start_loop(config: dict[str, Any], ctx: Any) -> None:
    """A loop whose first call in a process waits ``SETUP_S`` first (as a heavy import does)."""
    if not getattr(sys, "_faasml_slow_start_done", False):
        time.sleep(SETUP_S)
        sys._faasml_slow_start_done = True  # type: ignore[attr-defined]

    def mse(_: int, model: Any) -> float:
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(model(X), Y))

    _train(config, ctx, mse)
