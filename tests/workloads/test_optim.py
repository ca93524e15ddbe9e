"""Optimisers: the same steps as PyTorch's, exact resume from serialised state, clear errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from faasml.exceptions import ConfigError
from faasml.workloads import OPTIMIZERS, create_optimizer

torch = pytest.importorskip("torch")

SETTINGS: list[tuple[str, dict[str, Any], Any]] = [
    ("sgd", {"lr": 0.1}, lambda p: torch.optim.SGD(p, lr=0.1)),
    (
        "sgd",
        {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01},
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01),
    ),
    (
        "sgd",
        {"lr": 0.05, "momentum": 0.8, "nesterov": True},
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True),
    ),
    ("adam", {"lr": 0.01}, lambda p: torch.optim.Adam(p, lr=0.01)),
    (
        "adam",
        {"lr": 0.003, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1},
        lambda p: torch.optim.Adam(p, lr=0.003, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    ),
]


def _gradients(steps: int, size: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=size).astype(np.float32) for _ in range(steps)]


@pytest.mark.parametrize(("name", "hyper", "reference"), SETTINGS)
def test_steps_match_pytorch(name: str, hyper: dict[str, Any], reference: Any) -> None:
    start = np.random.default_rng(1).normal(size=50).astype(np.float32)
    ours = create_optimizer(name, 50, **hyper)
    theirs_param = torch.nn.Parameter(torch.tensor(start))
    theirs = reference([theirs_param])
    params = start
    for grad in _gradients(20, 50):
        params = ours.step(params, grad)
        theirs_param.grad = torch.tensor(grad)
        theirs.step()
    np.testing.assert_allclose(params, theirs_param.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert ours.steps == 20


@pytest.mark.parametrize(("name", "hyper", "reference"), SETTINGS)
def test_resume_from_bytes_is_exact(name: str, hyper: dict[str, Any], reference: Any) -> None:
    grads = _gradients(12, 30, seed=5)
    straight = create_optimizer(name, 30, **hyper)
    params = np.zeros(30, np.float32)
    for grad in grads:
        params = straight.step(params, grad)

    first = create_optimizer(name, 30, **hyper)
    resumed_params = np.zeros(30, np.float32)
    for grad in grads[:7]:
        resumed_params = first.step(resumed_params, grad)
    saved = first.to_bytes()
    second = create_optimizer(name, 30, **hyper)
    second.load_bytes(saved)
    for grad in grads[7:]:
        resumed_params = second.step(resumed_params, grad)
    assert np.array_equal(params, resumed_params)
    assert second.steps == 12


def test_state_is_a_copy_and_refuses_a_foreign_state() -> None:
    sgd = create_optimizer("sgd", 4, lr=0.1, momentum=0.5)
    sgd.step(np.zeros(4, np.float32), np.ones(4, np.float32))
    state = sgd.state_dict()
    state["velocity"][:] = 99
    assert not np.any(sgd.state_dict()["velocity"] == 99)
    adam = create_optimizer("adam", 4, lr=0.1)
    with pytest.raises(ConfigError, match=r"needs"):
        adam.load_state_dict(sgd.state_dict())
    with pytest.raises(ConfigError, match=r"shape"):
        create_optimizer("sgd", 5, lr=0.1, momentum=0.5).load_state_dict(sgd.state_dict())


@pytest.mark.parametrize(
    ("name", "hyper", "message"),
    [
        ("sgd", {}, "optimizer.lr is missing"),
        ("sgd", {"lr": 0}, r"optimizer.lr is 0, but must be > 0"),
        (
            "sgd",
            {"lr": 0.1, "momentum": 1.0},
            r"optimizer.momentum is 1.0, but must be in \[0, 1\)",
        ),
        ("sgd", {"lr": 0.1, "nesterov": True}, "needs optimizer.momentum > 0"),
        ("sgd", {"lr": 0.1, "beta1": 0.9}, "has no hyperparameter.*beta1.*accepts: lr, momentum"),
        ("adam", {"lr": "fast"}, "optimizer.lr is 'fast', but must be a number"),
        ("adam", {"lr": 0.1, "eps": -1}, "optimizer.eps"),
        ("rmsprop", {"lr": 0.1}, "unknown optimizer 'rmsprop'; choose one of: adam, sgd"),
    ],
)
def test_bad_hyperparameters_name_the_field(name: str, hyper: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        create_optimizer(name, 3, **hyper)


def test_step_checks_sizes_and_leaves_inputs_alone() -> None:
    assert OPTIMIZERS.names() == ["adam", "sgd"]
    adam = create_optimizer("adam", 3, lr=0.1)
    params, grad = np.ones(3, np.float32), np.ones(3, np.float32)
    new = adam.step(params, grad)
    assert np.array_equal(params, np.ones(3)) and not np.array_equal(new, params)
    assert new.dtype == np.float32
    with pytest.raises(ConfigError, match=r"built for 3 parameters"):
        adam.step(np.ones(4, np.float32), np.ones(4, np.float32))
    assert adam.hyperparameters()["lr"] == 0.1
