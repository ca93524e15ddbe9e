"""Run callbacks that export trials to experiment trackers, each an optional extra:
``TensorBoardCallback`` (``faasml[tensorboard]``: tensorboardX) and ``MLflowCallback``
(``faasml[mlflow]``: mlflow-skinny). One tracker run per trial: its configuration, its metrics
per epoch and how it ended."""

from __future__ import annotations

from faasml.tracking._mlflow import MLflowCallback
from faasml.tracking._tensorboard import TensorBoardCallback

__all__ = ["MLflowCallback", "TensorBoardCallback"]
