"""What loop job files name (``job_loops:...``): imported from this folder on the Python path,
as a job's ``module.path:factory`` is."""

from __future__ import annotations

from typing import Any

import torch

_G = torch.Generator().manual_seed(1)
X = torch.randn(64, 3, generator=_G)
Y = X @ torch.tensor([[0.5], [-1.0], [2.0]])


def loss_loop(config: dict[str, Any], ctx: Any) -> None:
    """Linear regression with SGD; reports its validation MSE as ``loss`` (what a target reads)."""
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    model, opt = ctx.prepare(model, opt)
    if ctx.checkpoint:
        model.load_state_dict(ctx.checkpoint["model"])
        opt.load_state_dict(ctx.checkpoint["opt"])
    train = ctx.shard((X, Y))
    for _ in ctx.epochs():
        for x, y in ctx.batches(train):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        with torch.no_grad():
            loss = float(torch.nn.functional.mse_loss(model(X), Y))
        ctx.report(
            {"loss": loss}, checkpoint={"model": model.state_dict(), "opt": opt.state_dict()}
        )


def pair(config: dict[str, Any], ctx: Any) -> int:
    """Takes two arguments, yet is neither a loop nor a model factory."""
    return 3


def linear(width: int = 3) -> torch.nn.Module:
    """A model factory (``factory(**options)``), not a loop."""
    return torch.nn.Linear(width, 2)


def three(a: Any, b: Any, c: Any) -> None:
    """Neither a loop (config, ctx) nor callable as factory(**options)."""
