"""The PyTorch models: flat-vector gradients against autograd, learning, and the adapter's rules."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from faasml.exceptions import WorkloadError
from faasml.workloads import MODELS, Model, create_model, create_optimizer
from faasml.workloads.data import Dataset, images, iterate_minibatches, sequences
from faasml.workloads.torch_model import TorchModel

torch = pytest.importorskip("torch")

CASES: dict[str, tuple[tuple[int, ...], int, dict[str, Any]]] = {
    "mlp": ((6,), 3, {"hidden": [8, 8]}),
    "mobilenet-small": ((3, 32, 32), 10, {"width": 4, "blocks": 2}),
    "resnet-small": ((3, 32, 32), 10, {"width": 4, "blocks": [1, 1]}),
    "transformer-small": ((12,), 2, {"vocab_size": 16, "d_model": 8, "heads": 2, "layers": 1}),
}


def _batch(name: str, rng: np.random.Generator, size: int = 5) -> tuple[np.ndarray, np.ndarray]:
    shape, classes, _ = CASES[name]
    if name == "transformer-small":
        x = rng.integers(0, 16, size=(size, *shape)).astype(np.int64)
    else:
        x = rng.normal(size=(size, *shape)).astype(np.float32)
    return x, rng.integers(0, classes, size)


def _build(name: str) -> Model:
    shape, classes, options = CASES[name]
    return create_model(name, shape, classes, **options)


def test_every_registered_model_has_a_case() -> None:
    # Linear models are tested in test_linear*.py; WindSR's (regressors of wind fields,
    # not classifiers) in test_windsr_model.py.
    elsewhere = {"logistic-regression", "svm", "windsr", "windsr-srcnn"}
    assert set(MODELS.names()) == set(CASES) | elsewhere


@pytest.mark.parametrize("name", sorted(CASES))
def test_flat_gradient_equals_autograd_of_the_module(name: str) -> None:
    """Unflatten the vector by hand, differentiate with torch.func: same gradient, same order."""
    model = _build(name)
    assert isinstance(model, TorchModel)
    rng = np.random.default_rng(0)
    params = model.init_params(1) + rng.normal(0, 0.01, model.num_params).astype(np.float32)
    x, y = _batch(name, rng)
    loss, grad = model.loss_and_grad(params, x, y)

    module = model.module_factory()
    named, offset = {}, 0
    for key, p in module.named_parameters():
        named[key] = torch.tensor(params[offset : offset + p.numel()]).reshape(p.shape)
        named[key].requires_grad_(True)
        offset += p.numel()
    assert offset == model.num_params
    out = torch.func.functional_call(module, named, (torch.from_numpy(x),))
    expected_loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(y))
    expected = torch.autograd.grad(expected_loss, list(named.values()))
    flat = torch.cat([g.reshape(-1) for g in expected]).numpy()
    assert loss == pytest.approx(float(expected_loss.detach()), rel=1e-5)
    np.testing.assert_allclose(grad, flat, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_directional_derivative_matches_finite_difference(name: str) -> None:
    model = _build(name)
    rng = np.random.default_rng(2)
    params = model.init_params(0)
    x, y = _batch(name, rng)
    _, grad = model.loss_and_grad(params, x, y)
    direction = rng.normal(size=model.num_params).astype(np.float32)
    direction /= np.linalg.norm(direction)
    eps = np.float32(1e-2)
    up = model.loss_and_grad(params + eps * direction, x, y)[0]
    down = model.loss_and_grad(params - eps * direction, x, y)[0]
    numeric = (up - down) / (2 * float(eps))
    assert numeric == pytest.approx(float(grad @ direction), rel=0.05, abs=2e-3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_deterministic_and_stateless(name: str) -> None:
    model = _build(name)
    params = model.init_params(7)
    assert np.array_equal(params, _build(name).init_params(7))
    assert not np.array_equal(params, model.init_params(8))
    before = params.copy()
    x, y = _batch(name, np.random.default_rng(3))
    first = model.loss_and_grad(params, x, y)
    model.loss_and_grad(model.init_params(9), x, y)  # other parameters in between
    second = model.loss_and_grad(params, x, y)
    assert np.array_equal(params, before)
    assert first[0] == second[0] and np.array_equal(first[1], second[1])
    assert set(model.evaluate(params, x, y)) >= {"loss", "accuracy"}


@pytest.mark.parametrize(
    ("name", "data", "options"),
    [
        ("mlp", images(256, classes=4, size=8, channels=1, seed=0), {"hidden": [16]}),
        ("mobilenet-small", images(256, classes=4, seed=0), {"width": 8, "blocks": 2}),
        ("resnet-small", images(256, classes=4, seed=0), CASES["resnet-small"][2]),
        (
            "transformer-small",
            sequences(256, length=12, vocab=16, seed=0),
            CASES["transformer-small"][2],
        ),
    ],
)
def test_torch_models_learn(name: str, data: Dataset, options: dict[str, Any]) -> None:
    model = create_model(name, data.input_shape, data.num_classes, **options)
    optimizer = create_optimizer(
        "adam", model.num_params, lr=0.03 if name == "mobilenet-small" else 0.01
    )
    params = model.init_params(0)
    start = model.evaluate(params, data.features, data.labels)["loss"]
    for epoch in range(3):
        for _, x, y in iterate_minibatches(data, 32, seed=0, epoch=epoch):
            params = optimizer.step(params, model.loss_and_grad(params, x, y)[1])
    assert model.evaluate(params, data.features, data.labels)["loss"] < 0.85 * start


def test_user_module_factory_by_path_and_adapter() -> None:
    model = create_model("torch.nn:Linear", (4,), 3, in_features=4, out_features=3)
    assert model.num_params == 15
    x, y = np.ones((2, 4), np.float32), np.array([0, 2])
    loss, grad = model.loss_and_grad(model.init_params(0), x, y)
    assert np.isfinite(loss) and grad.shape == (15,)
    torch.manual_seed(123)  # the global RNG state must not matter: the seed decides
    again = create_model("torch.nn:Linear", (4,), 3, in_features=4, out_features=3)
    assert np.array_equal(again.init_params(5), model.init_params(5))
    assert not np.array_equal(model.init_params(5), model.init_params(6))

    double = model.loss_and_grad(model.init_params(0), x.astype(np.float64), y)
    assert double[0] == pytest.approx(loss)  # float64 features are cast to the parameters' type

    adapted = TorchModel(
        lambda: torch.nn.Sequential(torch.nn.Linear(4, 1), torch.nn.Flatten(0)),
        lambda out, labels: torch.nn.functional.binary_cross_entropy_with_logits(
            out, labels.float()
        ),
        input_shape=(4,),
        num_classes=2,
    )
    loss, grad = adapted.loss_and_grad(adapted.init_params(0), x, np.array([0, 1]))
    assert grad.shape == (5,) and np.isfinite(loss)


def test_batchnorm_buffers_are_a_flat_vector_the_step_updates() -> None:
    model = TorchModel(
        lambda: torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)),
        input_shape=(4,),
        num_classes=3,
    )
    assert model.num_buffers == 3 + 3 + 1  # running mean, running var, batches tracked
    initial = model.init_buffers(0)
    np.testing.assert_array_equal(initial, [0, 0, 0, 1, 1, 1, 0])
    model.load_buffers(initial)
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    y = np.arange(8) % 3
    params = model.init_params(0)
    loss, grad = model.loss_and_grad(params, x, y)
    after = model.buffers()
    assert after[-1] == 1.0 and not np.array_equal(after[:6], initial[:6])
    # The loss and gradient do not depend on the buffers (batch statistics in training).
    model.load_buffers(after * 3)
    again = model.loss_and_grad(params, x, y)
    assert again[0] == loss and np.array_equal(again[1], grad)
    # Evaluation uses the loaded buffers.
    model.load_buffers(initial)
    first = model.evaluate(params, x, y)["loss"]
    model.load_buffers(after)
    assert model.evaluate(params, x, y)["loss"] != first
    assert model.size_mb == (model.num_params + 7) * 4 / 1e6
    with pytest.raises(WorkloadError, match=r"has 7 buffer values, got 2"):
        model.load_buffers(np.zeros(2, np.float32))


def test_adapter_refuses_what_it_cannot_synchronise() -> None:
    with pytest.raises(WorkloadError, match=r"must return a torch.nn.Module"):
        TorchModel(lambda: 3, input_shape=(4,), num_classes=2)
    with pytest.raises(WorkloadError, match=r"cannot load model factory"):
        create_model("torch.nn:NoSuchLayer", (4,), 2)
    with pytest.raises(WorkloadError, match=r"shape \(channels, height, width\)"):
        create_model("mobilenet-small", (10,), 2)
    with pytest.raises(WorkloadError, match=r"model.width"):
        create_model("resnet-small", (3, 32, 32), 10, width=0)
    with pytest.raises(WorkloadError, match=r"multiple of model.heads"):
        create_model("transformer-small", (8,), 2, d_model=10, heads=3)
    model = _build("transformer-small")
    with pytest.raises(WorkloadError, match=r"token ids must lie in"):
        model.loss_and_grad(
            model.init_params(0), np.full((1, 12), 99, np.int64), np.zeros(1, np.int64)
        )
