"""WindSR and its SR-CNN baseline as faasml models (``model: windsr`` / ``model: windsr-srcnn``).

A sample is a WindSR patch as ``fields.CHANNELS`` lays it out (6, size, size); the labels are
ignored. Training minimises the network's own loss (the DDPM ε-loss, Eq. 6.3, or the SR-CNN's
MSE) through the flat-vector ``Model`` contract, so it runs in faasml's function workers like
any other model. ``evaluate`` reports:

- ``loss``: the same loss at seeded timesteps and noise (comparable across epochs);
- ``psnr``, ``ssim`` of the super-resolved held-out patches (DDIM with ``sample_steps`` steps
  for WindSR) and ``bicubic_psnr``, ``bicubic_ssim`` of plain bicubic upsampling;
- ``accuracy``: the SSIM again, so that ``tuning.metric: accuracy`` ranks trials by structural
  similarity (higher is better). It is not a classification accuracy.

With the ``assimilate`` option (a job's ``assimilate:`` section) evaluation also
super-resolves with the stations assimilated and reports, beside the plain figures,
``assim_psnr``, ``assim_ssim`` and the RMSE against the truth field within ``NEAR_SITES``
cells of a station, plain (``site_rmse``) and assimilated (``assim_site_rmse``).

Inside a faasml worker the figures but the loss are also reported (``faasml.report``) with a
``val_`` prefix (``val_psnr``, ``val_assim_psnr``, ...), so they land in each epoch's history
in the run record.

``super_resolve`` is the inference path with optional assimilation (``assimilate``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from faasml._validate import shown
from faasml.exceptions import WorkloadError
from faasml.workloads import context
from faasml.workloads._base import FloatVector
from faasml.workloads._dataset import Dataset
from faasml.workloads.torch_model import TorchModel
from faasml.workloads.windsr import assimilate as da
from faasml.workloads.windsr import metrics
from faasml.workloads.windsr.diffusion import PREDICTIONS, SCHEDULES, SRCNN, WindSRNet, upsample
from faasml.workloads.windsr.fields import CHANNELS, WindPatches, patches_from_dataset

EVAL_SEED = 0
NEAR_SITES = 3
"""Cells around a station over which ``site_rmse`` compares the field with the truth."""


def _int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise WorkloadError(
            f"the value of model.{name} is {shown(value)}, "
            f"but must be an integer in [{low}, {high}]"
        )
    return value


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise WorkloadError(
            f"the value of model.{name} is {shown(value)}, but must be true or false"
        )
    return value


def _check_shape(model: str, input_shape: tuple[int, ...], scale: int) -> int:
    if len(input_shape) != 3 or input_shape[0] != len(CHANNELS) or input_shape[1] != input_shape[2]:
        raise WorkloadError(
            f"model '{model}' needs WindSR samples of shape ({len(CHANNELS)}, size, size) "
            f"(dataset 'wind-sr' or format 'windsr'), but the data has samples of shape "
            f"{tuple(input_shape)}"
        )
    size = input_shape[1]
    if size % scale or size // scale < 2:
        raise WorkloadError(
            f"the value of model.scale is {scale}, but must divide the patch size {size} "
            "and leave at least 2 low-resolution cells"
        )
    return size


class WindModel(TorchModel):
    """A WindSR network (``WindSRNet`` or ``SRCNN``) through the Model contract."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        input_shape: tuple[int, ...],
        num_classes: int,
        name: str,
        scale: int,
        sample_steps: int = 3,
        eval_images: int = 64,
        assimilation: da.Assimilation | None = None,
    ) -> None:
        super().__init__(
            factory,
            lambda loss, _labels: loss,
            input_shape=input_shape,
            num_classes=num_classes,
            name=name,
        )
        self.scale, self.sample_steps, self.eval_images = scale, sample_steps, eval_images
        self.assimilation = assimilation

    def check_sample(self, features: NDArray[Any]) -> None:
        """Raise a WorkloadError when ``features`` do not fit the model (shape, scale)."""
        self._inputs(features, np.zeros(len(features), dtype=np.int64))

    def _inputs(self, features: NDArray[Any], labels: NDArray[np.int64]) -> tuple[Any, Any]:
        x, y = super()._inputs(features, labels)
        s = self.scale
        lr = x[:, 1:2, ::s, ::s]
        if not torch.equal(lr.repeat_interleave(s, 2).repeat_interleave(s, 3), x[:, 1:2]):
            raise WorkloadError(
                f"model '{self.name}' has scale {s}, but the data's low-resolution channel is "
                f"not constant over {s}×{s} blocks: set model.scale to the dataset's scale"
            )
        return x, y

    def predict(
        self,
        params: FloatVector,
        patches: WindPatches,
        *,
        assimilate: str | int | None = None,
        steps: int | None = None,
        average: int = 1,
        seed: int = EVAL_SEED,
        inpaint: bool = True,
        strength: float = 1.0,
        **thresholds: Any,
    ) -> NDArray[np.float32]:
        """Super-resolved fields (n, size, size) in m/s (see ``super_resolve``)."""
        self._load(params)
        return super_resolve(
            self.module,
            patches,
            assimilate=assimilate,
            steps=steps or self.sample_steps,
            average=average,
            seed=seed,
            inpaint=inpaint,
            strength=strength,
            **thresholds,
        )

    def evaluate(
        self, params: FloatVector, features: NDArray[Any], labels: NDArray[np.int64]
    ) -> dict[str, float]:
        self._load(params)
        x, _ = self._inputs(features, labels)
        self.module.eval()
        generator = torch.Generator().manual_seed(EVAL_SEED)
        with torch.no_grad():
            if isinstance(self.module, WindSRNet):
                loss = float(self.module.loss(x, generator).item())
            else:
                loss = float(self.module(x).item())
        chosen = x[: self.eval_images]
        hr = chosen[:, 0].numpy()
        base = upsample(chosen[:, 1:2, :: self.scale, :: self.scale], self.scale)
        with torch.no_grad():
            if isinstance(self.module, WindSRNet):
                sr = self.module.sample(base, chosen[:, 2:3], self.sample_steps, generator)
            else:
                sr = self.module.predict(base, chosen[:, 2:3])
        sr_np, base_np = sr[:, 0].numpy(), base[:, 0].numpy()
        quality = metrics.ssim(hr, sr_np)
        scores = {
            "loss": loss,
            "accuracy": quality,
            "psnr": metrics.psnr(hr, sr_np),
            "ssim": quality,
            "bicubic_psnr": metrics.psnr(hr, base_np),
            "bicubic_ssim": metrics.ssim(hr, base_np),
        }
        if self.assimilation is not None:
            scores.update(self._assimilated(chosen.numpy(), sr_np))
        if context.active():  # inside a faasml worker: into the epoch's history ("reported")
            context.report(
                **{f"val_{key}": value for key, value in scores.items() if key != "loss"}
            )
        return scores

    def _assimilated(self, chosen: NDArray[Any], plain: NDArray[Any]) -> dict[str, float]:
        """The figures with the stations assimilated, beside the plain field's site error."""
        setting = self.assimilation
        assert setting is not None
        patches = patches_from_dataset(
            Dataset(chosen, np.zeros(len(chosen), dtype=np.int64), 2), self.scale
        )
        rows, cols, readings = da.stations_for(
            setting, patches.truth, patches.rows, patches.cols, patches.readings, EVAL_SEED
        )
        patches = dataclasses.replace(patches, rows=rows, cols=cols, readings=readings)
        assimilated = super_resolve(
            self.module,
            patches,
            assimilate=setting.radius,
            steps=self.sample_steps,
            seed=EVAL_SEED,
            inpaint=setting.inpaint,
            strength=setting.strength,
        )
        scores = {
            "assim_psnr": metrics.psnr(patches.hr, assimilated),
            "assim_ssim": metrics.ssim(patches.hr, assimilated),
        }
        if rows.size:  # patches without stations have no site error (and no NaN is recorded)
            near = ~metrics.away_from_sites(patches.truth, rows, cols, NEAR_SITES)
            scores["site_rmse"] = metrics.rmse(patches.truth, plain, near)
            scores["assim_site_rmse"] = metrics.rmse(patches.truth, assimilated, near)
        return scores


def super_resolve(
    module: Any,
    patches: WindPatches,
    *,
    assimilate: str | int | None = None,
    steps: int = 3,
    average: int = 1,
    seed: int = EVAL_SEED,
    batch: int = 256,
    inpaint: bool = True,
    strength: float = 1.0,
    **thresholds: Any,
) -> NDArray[np.float32]:
    """HR fields (n, size, size) in m/s from the patches' LR and terrain.

    ``module``: a ``WindSRNet`` (DDIM, ``steps`` steps, the mean of ``average`` samples), an
    ``SRCNN``, or None for bicubic upsampling. ``assimilate``: None (no observations),
    ``"dynamic"`` (Algorithm 1's radius per station, ``thresholds`` passed on) or a fixed radius
    in cells; the stations are in-painted into the upsampled field before it conditions the
    model (Eq. 6.4, its weight scaled by ``strength``). With ``inpaint`` (and a WindSRNet) the
    station cells are also in-painted while sampling (``WindSRNet.sample``'s ``known``), so the
    output holds the readings there.
    """
    scale = patches.scale
    generator = torch.Generator().manual_seed(int(seed))
    out = np.empty_like(patches.hr)
    for start in range(0, len(patches), batch):
        part = slice(start, start + batch)
        lr = torch.from_numpy(np.ascontiguousarray(patches.lr[part][:, None]))
        base = upsample(lr, scale)
        if assimilate is not None:
            radius = None if assimilate == "dynamic" else int(assimilate)
            blended = da.composite(
                base[:, 0].numpy(),
                patches.terrain[part],
                patches.rows[part],
                patches.cols[part],
                patches.readings[part],
                radius,
                strength,
                **thresholds,
            )
            base = torch.from_numpy(blended[:, None])
        terrain = torch.from_numpy(np.ascontiguousarray(patches.terrain[part][:, None]))
        known = None
        if assimilate is not None and inpaint and patches.rows.size:
            known = torch.from_numpy(patches.mask()[part][:, None])
        with torch.no_grad():
            if module is None:
                result = base
            elif isinstance(module, WindSRNet):
                module.eval()
                result = module.sample(base, terrain, steps, generator, average, known)
            else:
                module.eval()
                result = module.predict(base, terrain)
        out[part] = result[:, 0].numpy()
    return out


def windsr(
    input_shape: tuple[int, ...],
    num_classes: int,
    scale: int = 4,
    width: int = 32,
    levels: int = 2,
    terrain: bool = True,
    timesteps: int = 1000,
    schedule: str = "linear",
    prediction: str = "x0",
    sample_steps: int = 3,
    eval_images: int = 64,
    assimilate: Mapping[str, Any] | None = None,
) -> WindModel:
    """``model: windsr``: the conditional DDPM (``diffusion.WindSRNet``)."""
    scale = _int("scale", scale, 2, 16)
    _check_shape("windsr", input_shape, scale)
    if schedule not in SCHEDULES:
        raise WorkloadError(
            f"the value of model.schedule is {shown(schedule)}, but must be one of: "
            f"{', '.join(SCHEDULES)}"
        )
    if prediction not in PREDICTIONS:
        raise WorkloadError(
            f"the value of model.prediction is {shown(prediction)}, but must be one of: "
            f"{', '.join(PREDICTIONS)}"
        )
    width = _int("width", width, 4, 256)
    levels = _int("levels", levels, 1, 4)
    use_terrain = _flag("terrain", terrain)
    steps = _int("timesteps", timesteps, 10, 10_000)
    return WindModel(
        lambda: WindSRNet(scale, width, levels, use_terrain, steps, schedule, prediction),
        input_shape=input_shape,
        num_classes=num_classes,
        name="windsr",
        scale=scale,
        sample_steps=_int("sample_steps", sample_steps, 1, steps),
        eval_images=_int("eval_images", eval_images, 1, 100_000),
        assimilation=_assimilation(assimilate),
    )


def srcnn(
    input_shape: tuple[int, ...],
    num_classes: int,
    scale: int = 4,
    width: int = 64,
    terrain: bool = False,
    eval_images: int = 64,
    assimilate: Mapping[str, Any] | None = None,
) -> WindModel:
    """``model: windsr-srcnn``: the SRCNN-like baseline (``diffusion.SRCNN``)."""
    scale = _int("scale", scale, 2, 16)
    _check_shape("windsr-srcnn", input_shape, scale)
    width = _int("width", width, 2, 512)
    use_terrain = _flag("terrain", terrain)
    return WindModel(
        lambda: SRCNN(scale, use_terrain, width),
        input_shape=input_shape,
        num_classes=num_classes,
        name="windsr-srcnn",
        scale=scale,
        eval_images=_int("eval_images", eval_images, 1, 100_000),
        assimilation=_assimilation(assimilate),
    )


def _assimilation(value: Mapping[str, Any] | None) -> da.Assimilation | None:
    return None if value is None else da.read_assimilation(value, "model.assimilate")
