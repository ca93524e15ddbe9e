"""`--target-loss` for `faasml plan train`: epochs from the offline (sampling) estimate."""

from __future__ import annotations

import argparse

from faasml.cli._common import console
from faasml.exceptions import ConfigError
from faasml.models.offline import offline_estimate
from faasml.sim.curves import read_curve


def add_target_loss_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("target loss (instead of --epochs)")
    group.add_argument(
        "--target-loss",
        type=float,
        metavar="L",
        help="plan for the epochs the offline estimate predicts to reach loss L",
    )
    group.add_argument(
        "--sample-curve",
        metavar="FILE",
        help="loss-curve file (CSV: epoch,loss) of a training run on a sample of the data",
    )
    group.add_argument(
        "--sample-fraction",
        type=float,
        default=0.05,
        metavar="F",
        help="share of the data the sample run used (default: 0.05)",
    )


def offline_epochs_from(args: argparse.Namespace) -> int:
    """Epochs to plan for from ``--target-loss`` and ``--sample-curve`` (LambdaML-style)."""
    if args.epochs is not None:
        raise ConfigError("give --epochs or --target-loss, not both")
    if args.sample_curve is None:
        raise ConfigError(
            "--target-loss needs --sample-curve FILE: the offline estimate extrapolates the loss "
            "curve of a short training run on a sample of the data"
        )
    curve = read_curve(args.sample_curve)
    estimate = offline_estimate(
        curve.epochs, curve.losses, args.target_loss, sample_fraction=args.sample_fraction
    )
    if not args.json:
        p = estimate.prediction
        high = "∞" if p.high == float("inf") else f"{p.high:.1f}"
        console().print(
            f"Offline estimate: {estimate.epochs} epochs to reach loss {args.target_loss:g} "
            f"({p.low:.1f}–{high}; {estimate.fit.family} fit of {len(curve)} sample epochs)"
        )
    return estimate.epochs
