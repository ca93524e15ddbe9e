"""WindSR models: a tiny DDPM and SR-CNN train and their losses fall, sampling, assimilation
(Algorithm 1, Eq. 6.4), PSNR / SSIM against reference values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from faasml.exceptions import WorkloadError
from faasml.workloads import create_model, create_optimizer
from faasml.workloads.data import generate_dataset
from faasml.workloads.windsr import assimilate, generate_patches, metrics

pytest.importorskip("torch")
pytest.importorskip("skimage")

from faasml.workloads.windsr.model import super_resolve

TINY = {"width": 8, "levels": 2, "timesteps": 50, "sample_steps": 3, "eval_images": 8}


def _train(model: Any, features: np.ndarray, labels: np.ndarray, steps: int) -> np.ndarray:
    params = model.init_params(0)
    optimizer = create_optimizer("adam", model.num_params, lr=0.003)
    for step in range(steps):
        chosen = slice((step * 8) % len(labels), (step * 8) % len(labels) + 8)
        _, grad = model.loss_and_grad(params, features[chosen], labels[chosen])
        params = optimizer.step(params, grad)
    return params


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("windsr", TINY),
        ("windsr", {**TINY, "prediction": "eps", "schedule": "cosine"}),
        ("windsr-srcnn", {"width": 8, "eval_images": 8}),
    ],
)
def test_a_tiny_model_trains_and_its_held_out_loss_falls(
    name: str, options: dict[str, Any]
) -> None:
    data = generate_dataset("wind-sr", 40, seed=0, size=16, scale=4)
    model = create_model(name, data.input_shape, data.num_classes, scale=4, **options)
    before = model.evaluate(model.init_params(0), data.features, data.labels)
    again = model.evaluate(model.init_params(0), data.features, data.labels)
    assert before == again  # evaluation is seeded
    params = _train(model, data.features, data.labels, 60)
    after = model.evaluate(params, data.features, data.labels)
    assert after["loss"] < 0.95 * before["loss"]
    assert after["accuracy"] == after["ssim"]
    assert np.isfinite(after["psnr"]) and -1 <= after["ssim"] <= 1
    assert after["bicubic_psnr"] == before["bicubic_psnr"]


def test_eight_times_super_resolution_builds_and_trains_a_step() -> None:
    data = generate_dataset("wind-sr", 4, seed=0, size=64, scale=8)
    model = create_model("windsr", data.input_shape, 2, scale=8, width=4, levels=3, timesteps=20)
    loss, grad = model.loss_and_grad(model.init_params(0), data.features, data.labels)
    assert np.isfinite(loss) and grad.shape == (model.num_params,) and np.abs(grad).sum() > 0


def test_the_model_refuses_data_of_another_scale_or_shape() -> None:
    data = generate_dataset("wind-sr", 4, seed=0, size=16, scale=2)
    model = create_model("windsr", data.input_shape, 2, scale=4, **TINY)
    with pytest.raises(WorkloadError, match=r"not constant over 4×4 blocks: set model\.scale"):
        model.loss_and_grad(model.init_params(0), data.features, data.labels)
    with pytest.raises(
        WorkloadError, match=r"model 'windsr' needs WindSR samples of shape \(6, size, size\)"
    ):
        create_model("windsr", (3, 32, 32), 10)
    with pytest.raises(WorkloadError, match=r"model\.schedule is 'square'"):
        create_model("windsr", data.input_shape, 2, schedule="square")
    with pytest.raises(WorkloadError, match=r"model\.prediction is 'noise'.*eps, x0, v"):
        create_model("windsr", data.input_shape, 2, prediction="noise")
    with pytest.raises(
        WorkloadError, match=r"model.scale is 32, but must be an integer in \[2, 16\]"
    ):
        create_model("windsr", data.input_shape, 2, scale=32)


def test_sampling_is_seeded_and_none_is_bicubic() -> None:
    import torch

    from faasml.workloads.windsr.diffusion import WindSRNet

    torch.manual_seed(0)
    net = WindSRNet(4, width=8, levels=2, timesteps=50)
    torch.nn.init.normal_(net.unet.head.weight, std=0.1)  # untrained x̂₀ would be 0 everywhere
    patches = generate_patches(3, size=16, scale=4, seed=2)
    one = super_resolve(net, patches, steps=3, seed=1)
    assert np.array_equal(one, super_resolve(net, patches, steps=3, seed=1))
    assert not np.array_equal(one, super_resolve(net, patches, steps=3, seed=2))
    bicubic = super_resolve(None, patches)
    lr = torch.from_numpy(patches.lr[:, None])
    expected = torch.nn.functional.interpolate(lr, scale_factor=4, mode="bicubic")[:, 0]
    np.testing.assert_allclose(bicubic, expected.numpy(), rtol=1e-6)


def test_inpainting_while_sampling_holds_the_readings_at_the_stations() -> None:
    import torch

    from faasml.workloads.windsr.diffusion import WindSRNet

    torch.manual_seed(0)
    net = WindSRNet(4, width=8, levels=2, timesteps=50)
    torch.nn.init.normal_(net.unet.head.weight, std=0.1)
    patches = generate_patches(4, size=16, scale=4, stations=3, seed=6)
    sites = (patches.rows, patches.cols, patches.readings)
    inpainted = super_resolve(net, patches, steps=4, assimilate="dynamic")
    conditioned = super_resolve(net, patches, steps=4, assimilate="dynamic", inpaint=False)
    assert metrics.site_error(inpainted, *sites)[1] < 1e-4
    assert metrics.site_error(conditioned, *sites)[1] > 1e-2


def test_the_impact_radius_grows_over_flat_steady_ground_only() -> None:
    flat, steady = np.zeros((20, 20)), np.full((20, 20), 7.0)
    assert assimilate.dynamic_radius(flat, steady, 10, 10) == 6
    rough = np.random.default_rng(0).normal(0, 500, (20, 20))
    assert assimilate.dynamic_radius(rough, steady, 10, 10) == 1
    gusty = steady + np.random.default_rng(1).normal(0, 3, (20, 20))
    assert assimilate.dynamic_radius(flat, gusty, 10, 10) == 1
    ramp = np.tile(np.arange(20.0), (20, 1)) * 20  # terrain std grows with the disc
    radius = assimilate.dynamic_radius(ramp, steady, 10, 10, terrain_threshold=50.0)
    assert 1 < radius < 6
    with pytest.raises(WorkloadError, match="radius bounds"):
        assimilate.dynamic_radius(flat, steady, 1, 1, min_radius=3, max_radius=2)


def test_the_composite_holds_the_reading_at_the_station_and_the_simulation_far_away() -> None:
    sim = np.full((1, 16, 16), 5.0, dtype=np.float32)
    terrain = np.zeros((1, 16, 16))
    rows, cols, readings = np.array([[4]]), np.array([[4]]), np.array([[9.0]])
    blended = assimilate.composite(sim, terrain, rows, cols, readings, radius=3)
    assert blended[0, 4, 4] == pytest.approx(9.0)
    assert 5.0 < blended[0, 4, 6] < 9.0  # inside the radius: between the two
    assert blended[0, 4, 8] == 5.0 and blended[0, 12, 12] == 5.0  # beyond it: the simulation
    dynamic = assimilate.composite(sim, terrain, rows, cols, readings)
    assert dynamic[0, 4, 9] > 5.0  # flat and steady: the radius grew to 6


def test_assimilating_into_bicubic_removes_the_error_at_the_sites() -> None:
    patches = generate_patches(10, size=32, scale=4, stations=4, seed=3)
    plain = super_resolve(None, patches)
    blended = super_resolve(None, patches, assimilate="dynamic")
    mae_plain, _ = metrics.site_error(plain, patches.rows, patches.cols, patches.readings)
    mae_da, rmse_da = metrics.site_error(blended, patches.rows, patches.cols, patches.readings)
    assert mae_plain > 0.3 and rmse_da < 1e-5 and mae_da < 1e-5
    far = metrics.away_from_sites(patches.hr, patches.rows, patches.cols, 6)
    assert metrics.rmse(patches.hr, blended, far) == pytest.approx(
        metrics.rmse(patches.hr, plain, far)
    )


def _reference_ssim(x: np.ndarray, y: np.ndarray, data_range: float) -> float:
    """Wang et al. (2004) Eq. 13 with an 11-tap Gaussian window (σ = 1.5), written out."""
    from scipy.ndimage import gaussian_filter

    def blur(a: np.ndarray) -> np.ndarray:
        return gaussian_filter(a, sigma=1.5, truncate=3.5, mode="reflect")

    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    return float(s[5:-5, 5:-5].mean())


def test_psnr_and_ssim_match_reference_values() -> None:
    ramp = np.tile(np.linspace(0.0, 1.0, 32), (32, 1))[None]
    assert metrics.psnr(ramp, ramp + 0.1) == pytest.approx(20.0)  # 10·log10(1 / 0.01)
    assert metrics.ssim(ramp, ramp) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    x = rng.random((32, 32))
    y = np.clip(x + rng.normal(0, 0.2, (32, 32)), 0, 1)
    expected = _reference_ssim(x, y, float(np.ptp(x)))
    assert metrics.ssim(x[None], y[None]) == pytest.approx(expected, abs=1e-6)
    assert metrics.ssim(x[None], (1 - x)[None]) < 0
    with pytest.raises(WorkloadError, match="two stacks of patches"):
        metrics.psnr(ramp, ramp[0])
