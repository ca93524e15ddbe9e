"""The numpy models: gradients against finite differences, determinism, learning, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.exceptions import ConfigError, WorkloadError
from faasml.workloads import create_model, create_optimizer, evaluate_in_batches
from faasml.workloads.data import higgs_like, iterate_minibatches
from faasml.workloads.throughput import samples_per_second, seconds_per_mb


def _finite_difference(model, params, x, y, eps=1e-3):  # type: ignore[no-untyped-def]
    grad = np.zeros(len(params))
    for i in range(len(params)):
        up, down = params.copy(), params.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (model.loss_and_grad(up, x, y)[0] - model.loss_and_grad(down, x, y)[0]) / (
            2 * eps
        )
    return grad


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    batch=st.integers(1, 12),
    features=st.integers(1, 6),
    classes=st.integers(2, 4),
    l2=st.sampled_from([0.0, 0.1]),
)
def test_logistic_regression_gradient_matches_finite_differences(
    seed: int, batch: int, features: int, classes: int, l2: float
) -> None:
    rng = np.random.default_rng(seed)
    model = create_model("logistic-regression", (features,), classes, l2=l2)
    params = rng.normal(0, 0.5, model.num_params).astype(np.float32)
    x = rng.normal(size=(batch, features)).astype(np.float32)
    y = rng.integers(0, classes, batch)
    _, grad = model.loss_and_grad(params, x, y)
    assert grad.dtype == np.float32 and grad.shape == params.shape
    np.testing.assert_allclose(grad, _finite_difference(model, params, x, y), rtol=2e-2, atol=2e-3)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(1, 12), features=st.integers(1, 6))
def test_svm_subgradient_matches_finite_differences_away_from_the_hinge(
    seed: int, batch: int, features: int
) -> None:
    rng = np.random.default_rng(seed)
    model = create_model("svm", (features,), 2, l2=0.05)
    params = rng.normal(0, 0.5, model.num_params).astype(np.float32)
    x = rng.normal(size=(batch, features)).astype(np.float32)
    y = rng.integers(0, 2, batch)
    margins = 1 - (2 * y - 1) * (x @ params[:-1] + params[-1])
    if np.min(np.abs(margins)) < 0.05:  # the hinge's kink: no derivative to compare with
        return
    _, grad = model.loss_and_grad(params, x, y)
    np.testing.assert_allclose(grad, _finite_difference(model, params, x, y), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("name", ["logistic-regression", "svm"])
def test_same_seed_same_parameters_and_inputs_untouched(name: str) -> None:
    model = create_model(name, (5,), 2)
    assert np.array_equal(model.init_params(3), model.init_params(3))
    assert not np.array_equal(model.init_params(3), model.init_params(4))
    params = model.init_params(0)
    before = params.copy()
    x, y = np.ones((4, 5), np.float32), np.array([0, 1, 1, 0])
    first = model.loss_and_grad(params, x, y)
    second = model.loss_and_grad(params, x, y)
    assert np.array_equal(params, before)
    assert first[0] == second[0] and np.array_equal(first[1], second[1])


@pytest.mark.parametrize("name", ["logistic-regression", "svm"])
def test_linear_models_learn_higgs_like_data(name: str) -> None:
    data = higgs_like(3000, seed=1)
    model = create_model(name, data.input_shape, data.num_classes)
    optimizer = create_optimizer("sgd", model.num_params, lr=0.1, momentum=0.9)
    params = model.init_params(0)
    start = model.evaluate(params, data.features, data.labels)
    for epoch in range(2):
        for _, x, y in iterate_minibatches(data, 64, seed=0, epoch=epoch):
            params = optimizer.step(params, model.loss_and_grad(params, x, y)[1])
    end = model.evaluate(params, data.features, data.labels)
    assert end["loss"] < 0.8 * start["loss"]
    assert end["accuracy"] > 0.7


def test_bad_inputs_name_the_rule() -> None:
    model = create_model("logistic-regression", (3,), 2)
    params = model.init_params(0)
    with pytest.raises(WorkloadError, match=r"features of shape \(batch, 3\)"):
        model.loss_and_grad(params, np.zeros((2, 4), np.float32), np.zeros(2, np.int64))
    with pytest.raises(WorkloadError, match=r"flat vector of 4 parameters"):
        model.loss_and_grad(params[:3], np.zeros((2, 3), np.float32), np.zeros(2, np.int64))
    with pytest.raises(WorkloadError, match=r"class indices in \[0, 2\)"):
        model.loss_and_grad(params, np.zeros((2, 3), np.float32), np.array([0, 2]))
    with pytest.raises(WorkloadError, match=r"two-class model"):
        create_model("svm", (3,), 3)
    with pytest.raises(WorkloadError, match=r"has no option"):
        create_model("svm", (3,), 2, l3=0.1)
    with pytest.raises(WorkloadError, match=r"model.l2"):
        create_model("logistic-regression", (3,), 2, l2=-1.0)
    with pytest.raises(ConfigError, match=r"unknown model 'nope'.*logistic-regression"):
        create_model("nope", (3,), 2)


def test_evaluation_in_batches_equals_one_pass() -> None:
    data = higgs_like(1000, seed=2)
    model = create_model("logistic-regression", data.input_shape, 2)
    params = model.init_params(1)
    whole = model.evaluate(params, data.features, data.labels)
    sliced = evaluate_in_batches(model, params, data.features, data.labels, batch_size=300)
    assert sliced["loss"] == pytest.approx(whole["loss"], rel=1e-6)
    assert sliced["accuracy"] == pytest.approx(whole["accuracy"], rel=1e-9)
    with pytest.raises(WorkloadError, match="no samples"):
        evaluate_in_batches(model, params, data.features[:0], data.labels[:0])


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["logistic-regression", "svm"]),
    seed=st.integers(0, 2**31 - 1),
    batch=st.integers(1, 40),
    scale=st.floats(0.0, 5.0),
)
def test_loss_and_evaluation_invariants(name: str, seed: int, batch: int, scale: float) -> None:
    """Loss >= 0, accuracy in [0, 1], evaluate's loss equals the training loss."""
    rng = np.random.default_rng(seed)
    model = create_model(name, (4,), 2, l2=0.01)
    params = (rng.normal(size=model.num_params) * scale).astype(np.float32)
    x = rng.normal(size=(batch, 4)).astype(np.float32)
    y = rng.integers(0, 2, batch)
    loss, grad = model.loss_and_grad(params, x, y)
    metrics = model.evaluate(params, x, y)
    assert loss >= 0 and np.all(np.isfinite(grad))
    assert 0.0 <= metrics["accuracy"] <= 1.0
    assert metrics["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6)


def test_throughput_measurement_counts_samples() -> None:
    data = higgs_like(64, seed=0)
    model = create_model("svm", data.input_shape, 2)
    rate = samples_per_second(
        model, model.init_params(0), data.features, data.labels, seconds=0.01, repeats=1
    )
    assert rate > 0
    assert seconds_per_mb(rate, 116) == pytest.approx(1e6 / (rate * 116))
    with pytest.raises(WorkloadError, match="empty batch"):
        samples_per_second(model, model.init_params(0), data.features[:0], data.labels[:0])
