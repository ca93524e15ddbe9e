"""A small CNN with BatchNorm for the benchmark jobs (the built-in CNNs use GroupNorm).

A job names it as ``model: {name: bench_bn_cnn:bn_cnn, width: 8}``; this folder must be on
``PYTHONPATH`` (the benchmarks put it there), so the worker functions can import it.
"""

from __future__ import annotations

from typing import Any


def bn_cnn(width: int = 8, channels: int = 3, classes: int = 10) -> Any:
    """conv-BN-ReLU ×2 (the second halves the resolution and doubles the channels), global
    average pooling, a linear classifier."""
    import torch

    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, width, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(width),
        torch.nn.ReLU(),
        torch.nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False),
        torch.nn.BatchNorm2d(2 * width),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * width, classes),
    )
