"""The benchmark job set as users' own training loops (``benchmarks/bench_loops.py``): each
factory makes its seeded synthetic data and returns ``train_loop(config, ctx)``, written as a
user writes one (docs/your-own-loop.md). faasml ships a loop, its data and this module's
helpers to the functions by value."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

Loop = Callable[[dict[str, Any], Any], None]


def _resume(ctx: Any, **parts: Any) -> None:
    """Load each part's state from the last report's checkpoint (None at the start)."""
    for key, part in parts.items():
        if ctx.checkpoint:
            part.load_state_dict(ctx.checkpoint[key])


def _saved(**parts: Any) -> dict[str, Any]:
    return {key: part.state_dict() for key, part in parts.items()}


def _step(opt: Any, loss: torch.Tensor, model: Any = None, clip: float = 0.0) -> None:
    """One round: gradients (clipped to norm ``clip`` where given), then the step."""
    opt.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()


def _conv(inputs: int, outputs: int) -> list[torch.nn.Module]:
    conv = torch.nn.Conv2d(inputs, outputs, 3, padding=1)
    return [conv, torch.nn.BatchNorm2d(outputs), torch.nn.ReLU()]


def _accuracy(model: torch.nn.Module, valid: tuple[torch.Tensor, torch.Tensor], dev: Any) -> float:
    model.eval()
    with torch.no_grad():
        right = (model(valid[0].to(dev)).argmax(1) == valid[1].to(dev)).float().mean()
    model.train()
    return float(right)


def mlp_loop(rows: int) -> Loop:
    """An MSE regression: AdamW, a cosine schedule, gradient clipping."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows + rows // 8, 16, generator=g)
    y = torch.sin(x[:, :1]) + x[:, 1:2] * x[:, 2:3] + 0.05 * torch.randn(len(x), 1, generator=g)
    train, valid = (x[:rows], y[:rows]), (x[rows:], y[rows:])

    def train_loop(config: dict[str, Any], ctx: Any) -> None:
        width = config["width"]
        model = torch.nn.Sequential(
            torch.nn.Linear(16, width), torch.nn.GELU(), torch.nn.Linear(width, 1)
        )
        opt = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=ctx.max_epochs)
        model, opt = ctx.prepare(model, opt)
        _resume(ctx, model=model, opt=opt, sched=sched)
        shard = ctx.shard(train)
        for _ in ctx.epochs():
            for xb, yb in ctx.batches(shard):
                _step(opt, torch.nn.functional.mse_loss(model(xb), yb), model, clip=1.0)
            sched.step()
            with torch.no_grad():
                error = torch.nn.functional.mse_loss(model(valid[0].to(ctx.device)), valid[1])
            rmse = math.sqrt(float(error))
            ctx.report({"val_rmse": rmse}, checkpoint=_saved(model=model, opt=opt, sched=sched))

    return train_loop


def bn_cnn_loop(rows: int) -> Loop:
    """A BatchNorm CNN on 16x16 images of 4 classes: SGD with momentum, a step schedule."""
    g = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 4, (rows + rows // 8,), generator=g)
    patterns = torch.randn(4, 3, 16, 16, generator=g)
    images = patterns[labels] + 2.0 * torch.randn(len(labels), 3, 16, 16, generator=g)
    train, valid = (images[:rows], labels[:rows]), (images[rows:], labels[rows:])

    def train_loop(config: dict[str, Any], ctx: Any) -> None:
        w = config["width"]
        body = [*_conv(3, w), torch.nn.MaxPool2d(2), *_conv(w, 2 * w)]
        head = [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(2 * w, 4)]
        model = torch.nn.Sequential(*body, *head)
        opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
        step = max(1, ctx.max_epochs // 2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=step, gamma=0.1)
        model, opt = ctx.prepare(model, opt)
        _resume(ctx, model=model, opt=opt, sched=sched)
        shard = ctx.shard(train)
        for _ in ctx.epochs():
            for xb, yb in ctx.batches(shard):
                _step(opt, torch.nn.functional.cross_entropy(model(xb), yb))
            sched.step()
            accuracy = _accuracy(model, valid, ctx.device)
            ctx.report({"val_acc": accuracy}, checkpoint=_saved(model=model, opt=opt, sched=sched))

    return train_loop


def transformer_loop(rows: int) -> Loop:
    """A small transformer classifying token sequences: AdamW, a per-round linear warm-up."""
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 32, (rows + rows // 8, 16), generator=g)
    labels = (tokens[:, 0] + tokens[:, -1]) % 4  # needs attention across the sequence
    train, valid = (tokens[:rows], labels[:rows]), (tokens[rows:], labels[rows:])

    def train_loop(config: dict[str, Any], ctx: Any) -> None:
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        encoder = torch.nn.TransformerEncoder(layer, config["layers"], enable_nested_tensor=False)
        embed, position = torch.nn.Embedding(32, 32), torch.nn.Parameter(torch.zeros(1, 16, 32))
        model = torch.nn.ModuleDict(
            {"embed": embed, "encoder": encoder, "head": torch.nn.Linear(32, 4)}
        )
        model.register_parameter("position", position)

        def forward(xb: torch.Tensor) -> torch.Tensor:
            hidden = model["encoder"](model["embed"](xb) + model.position)
            return model["head"](hidden.mean(1))

        opt = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=1e-2)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
        model, opt = ctx.prepare(model, opt)
        _resume(ctx, model=model, opt=opt, sched=sched)
        shard = ctx.shard(train)
        for _ in ctx.epochs():
            for xb, yb in ctx.batches(shard):
                _step(opt, torch.nn.functional.cross_entropy(forward(xb), yb))
                sched.step()
            with torch.no_grad():
                right = forward(valid[0].to(ctx.device)).argmax(1) == valid[1].to(ctx.device)
            metrics = {"val_acc": float(right.float().mean())}
            ctx.report(metrics, checkpoint=_saved(model=model, opt=opt, sched=sched))

    return train_loop
