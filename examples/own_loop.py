"""Tune your own PyTorch training loop (AdamW, a cosine schedule, gradient clipping, an MSE
regression) within a budget.

    python examples/own_loop.py --budget 0.05

The data is a small synthetic regression made here. faasml calls the loop once to see its
model and data, measures it, plans the successive-halving stages, and runs each trial's
epochs on real worker processes of the local platform: every function trains on its part of
each global batch, ``opt.step()`` averages the gradients first, and each epoch's report
(validation RMSE and a checkpoint) is the trial's. See docs/your-own-loop.md.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import torch

import faasml

_G = torch.Generator().manual_seed(0)
X = torch.randn(512, 8, generator=_G)
Y = torch.sin(X[:, :1]) + X[:, 1:2] * X[:, 2:3] + 0.05 * torch.randn(512, 1, generator=_G)
TRAIN, VALID = (X[:448], Y[:448]), (X[448:], Y[448:])


def evaluate(model: torch.nn.Module) -> float:
    """Root mean squared error on the validation rows."""
    model.eval()
    with torch.no_grad():
        x, y = VALID
        error = torch.nn.functional.mse_loss(model(x.to(next(model.parameters()).device)), y)
    model.train()
    return math.sqrt(float(error))


def train_loop(config: dict[str, Any], ctx: Any) -> None:
    """One trial: the loop faasml runs on each of the trial's functions."""
    width = config["width"]
    model = torch.nn.Sequential(
        torch.nn.Linear(8, width), torch.nn.GELU(), torch.nn.Linear(width, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=ctx.max_epochs)
    model, opt = ctx.prepare(model, opt)  # opt.step() first averages over the functions
    state = ctx.checkpoint  # None at the start, else what the last report carried
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
    train = ctx.shard(TRAIN)
    for _ in ctx.epochs():
        for x, y in ctx.batches(train):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        sched.step()
        state = {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}
        ctx.report({"val_rmse": evaluate(model)}, checkpoint=state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.05, help="US dollars (default 0.05)")
    parser.add_argument("--trials", type=int, default=4, help="configurations (default 4)")
    parser.add_argument("--run-dir", default=None, help="default runs/train_loop-<time>")
    args = parser.parse_args()

    results = faasml.Tuner(
        train_loop,
        {"lr": {"loguniform": [1e-3, 3e-2]}, "width": {"choice": [16, 64]}},
        budget=args.budget,
        tune_config=faasml.TuneConfig(num_samples=args.trials, metric="val_rmse", mode="min"),
        settings={"batch_size": 32, "tuning.epochs_per_stage": 2},
        run_dir=args.run_dir,
    ).fit()
    best = results.get_best_result()
    print(f"status: {results.record.status}, trials: {len(results)}, best: trial {best.trial_id}")
    for result in results.results:
        rmse = result.metrics.get("val_rmse")
        shown = f"val_rmse {rmse:.4f}" if rmse is not None else "no epoch"
        print(f"  trial {result.trial_id} {result.status}: {result.config}: {shown}")
    print(f"spent ${results.spent_usd:.6f} of ${args.budget}; run directory {results.run_dir}")


if __name__ == "__main__":
    main()
