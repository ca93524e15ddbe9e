"""A worker in another process computes bit-identical parameters and gradients.

The runtime's fault tolerance (a restarted worker continues from a checkpoint and the final
model equals the fault-free run's) rests on this: the same seed and minibatch give the same
bytes in every process.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import hashlib, sys
import numpy as np
import torch
torch.set_num_threads(1)
from faasml.workloads import create_model
from faasml.workloads.data import images, iterate_minibatches
for name, options in (("logistic-regression", {}), ("mobilenet-small", {"width": 4, "blocks": 2})):
    data = images(16, classes=3, seed=4)
    model = create_model(name, data.input_shape, data.num_classes, **options)
    params = model.init_params(11)
    _, x, y = next(iterate_minibatches(data, 8, seed=2, epoch=1))
    loss, grad = model.loss_and_grad(params, x, y)
    digest = hashlib.sha256(params.tobytes() + grad.tobytes() + np.float64(loss).tobytes())
    print(name, digest.hexdigest())
"""


def test_another_process_computes_the_same_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    exec(SCRIPT, {})  # here, in the test process
    ours = capsys.readouterr().out
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True
    )
    assert len(ours.splitlines()) == 2
    assert result.stdout == ours
