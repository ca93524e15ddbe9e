"""Tune a small BatchNorm CNN, written as a plain PyTorch training function, within a budget.

    python examples/tune_function.py --budget 0.05

The data ships offline: scikit-learn's bundled 8x8 digits when scikit-learn is installed,
else faasml's generated 8x8 images. faasml plans the successive-halving stages, runs every
trial on real worker processes of the local platform (BatchNorm statistics averaged over the
workers each round), bills them, and writes the run directory (record, report, checkpoints).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

import faasml


def load_data() -> tuple[Any, Any, str]:
    """(images of shape (N, 1, 8, 8) in [0, 1], labels 0..9, where they come from)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        from faasml.workloads.data import images

        data = images(1797, classes=10, size=8, channels=1, seed=0)
        return data.features, data.labels, "generated 8x8 images"
    digits = load_digits()
    features = (digits.images / 16.0).astype(np.float32)[:, None]
    return features, digits.target.astype(np.int64), "scikit-learn digits"


def train_fn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
    """Build the CNN for one configuration; the data is taken once, by the Tuner."""
    width = config["width"]
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, width, 3, padding=1),
        torch.nn.BatchNorm2d(width),
        torch.nn.ReLU(),
        torch.nn.Conv2d(width, 2 * width, 3, padding=1, stride=2),
        torch.nn.BatchNorm2d(2 * width),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * width, 10),
    )

    def loss(outputs: Any, labels: Any) -> Any:
        value = torch.nn.functional.cross_entropy(outputs, labels)
        if net.training:  # the loss also scores the test set at an epoch's end
            accuracy = (outputs.argmax(1) == labels).float().mean()
            ctx.report(last_batch_accuracy=float(accuracy))
        return value

    def split(part: str) -> tuple[Any, Any]:
        features, labels, _ = load_data()
        cut = len(labels) * 4 // 5
        return (features[:cut], labels[:cut]) if part == "train" else (features[cut:], labels[cut:])

    return faasml.TorchTrainable(
        model=net,
        train=lambda: split("train"),
        test=lambda: split("test"),
        loss=loss,
        optimizer="adam",
        lr=config["lr"],
        weight_decay=config["weight_decay"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.05, help="US dollars (default 0.05)")
    parser.add_argument("--trials", type=int, default=8, help="configurations (default 8)")
    parser.add_argument("--run-dir", default=None, help="default runs/train_fn-<time>")
    args = parser.parse_args()

    print(f"data: {load_data()[2]}")
    tuner = faasml.Tuner(
        train_fn,
        {
            "lr": {"loguniform": [0.001, 0.05]},
            "width": {"choice": [4, 8]},
            "weight_decay": 0.0,
        },
        budget=args.budget,
        tune_config=faasml.TuneConfig(num_samples=args.trials, metric="accuracy"),
        settings={"batch_size": 32},
        run_dir=args.run_dir,
    )
    results = tuner.fit()
    best = results.get_best_result()
    print(f"status: {results.record.status}, trials: {len(results)}")
    print(
        f"best: {best.config} validation accuracy {best.metrics['val_accuracy']:.3f}, "
        f"loss {best.metrics['val_loss']:.3f}; reported: last training batch accuracy "
        f"{best.metrics['reported']['last_batch_accuracy']:.3f}"
    )
    print(f"spent ${results.spent_usd:.6f} of ${args.budget}; run directory {results.run_dir}")


if __name__ == "__main__":
    main()
