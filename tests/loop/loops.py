"""Training loops the loop tests run (shipped to the workers by value)."""

from __future__ import annotations

import datetime
import math
import time
from pathlib import Path
from typing import Any

import torch

_G = torch.Generator().manual_seed(0)
X = torch.randn(96, 4, generator=_G)
Y = X @ torch.tensor([[1.0], [-2.0], [0.5], [0.0]]) + 0.1 * torch.randn(96, 1, generator=_G)
XV, YV = X[:24] + 0.05, Y[:24]
SPACE = {"lr": {"loguniform": [0.05, 0.1]}, "width": 8}
SETTINGS = {"batch_size": 16, "tuning.stages": 1, "tuning.epochs_per_stage": 3, "seed": 2}


def mlp_loop(config: dict[str, Any], ctx: Any) -> None:
    """MSE regression with AdamW, a cosine schedule and gradient clipping."""
    model = torch.nn.Sequential(
        torch.nn.Linear(4, config["width"]), torch.nn.Tanh(), torch.nn.Linear(config["width"], 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=ctx.max_epochs)
    model, opt = ctx.prepare(model, opt)
    state = ctx.checkpoint
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
    train = ctx.shard((X, Y))
    for epoch in ctx.epochs():
        for x, y in ctx.batches(train):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
        sched.step()
        if config.get("fail_at") == epoch:
            raise ValueError(f"boom at epoch {epoch}")
        with torch.no_grad():
            rmse = math.sqrt(float(torch.nn.functional.mse_loss(model(XV), YV)))
        saved = {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}
        if config.get("bad_checkpoint"):
            saved["when"] = datetime.datetime(2020, 1, 1)
        ctx.report({"rmse_elsewhere" if config.get("quiet") else "val_rmse": rmse}, saved)


def unprepared_loop(config: dict[str, Any], ctx: Any) -> None:
    """Trains without ctx.prepare: refused on more than one function."""
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    train = ctx.shard((X, Y))
    for _ in ctx.epochs():
        for x, y in ctx.batches(train):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        ctx.report(val_rmse=1.0)


def batchnorm_loop(config: dict[str, Any], ctx: Any) -> None:
    """A BatchNorm model; each function saves its buffers after every epoch."""
    model = torch.nn.Sequential(
        torch.nn.Linear(4, config["width"]),
        torch.nn.BatchNorm1d(config["width"]),
        torch.nn.ReLU(),
        torch.nn.Linear(config["width"], 1),
    )
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    model, opt = ctx.prepare(model, opt)
    if ctx.checkpoint:
        model.load_state_dict(ctx.checkpoint["model"])
        opt.load_state_dict(ctx.checkpoint["opt"])
    train = ctx.shard((X, Y))
    for epoch in ctx.epochs():
        model.train()
        for x, y in ctx.batches(train):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        buffers = {k: v.clone() for k, v in model.state_dict().items() if "running" in k}
        torch.save(buffers, Path(config["out"]) / f"e{epoch}-w{ctx.rank}.pt")
        ctx.report({"val_rmse": 0.0}, {"model": model.state_dict(), "opt": opt.state_dict()})


def stuck_loop(config: dict[str, Any], ctx: Any) -> None:
    """Never reaches its first ctx.report (an epoch longer than any time limit)."""
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    model, opt = ctx.prepare(model, opt)
    ctx.shard((X, Y))
    for _ in ctx.epochs():
        while True:
            time.sleep(0.05)
