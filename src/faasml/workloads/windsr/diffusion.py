"""The conditional DDPM of WindSR (dissertation Chapter 6, §6.1.1 and §6.2.2), in plain PyTorch.

- **Forward process** (Eq. 6.1): q(x_t | x_{t−1}) = N(√(1−β_t) x_{t−1}, β_t I) with a linear
  (Ho et al. 2020) or cosine (Nichol & Dhariwal 2021) schedule of ``timesteps`` steps, so
  x_t = √ᾱ_t x₀ + √(1−ᾱ_t) ε.
- **Training loss** (Eq. 6.3): E‖ε − ε_θ(x_t, t, c)‖², t uniform, ε ~ N(0, I).
- **Condition** c (SR3 with the chapter's terrain channel): the bicubic upsampling of the
  low-resolution field and, unless ``terrain=False``, the terrain height, concatenated with x_t.
- **What is diffused**: the residual x₀ = (HR − bicubic(LR)) / 1 m/s rather than the field
  itself (as SRDiff does), which lets a compact UNet learn in minutes on a CPU; the sample is
  bicubic(LR) + x₀.
- **Sampling**: DDIM (Song et al. 2021, η = 0) over ``steps`` evenly spaced timesteps.

The UNet is compact: ``levels`` resolutions of ``width``·2^i channels, one residual block with
GroupNorm, SiLU and a sinusoidal time embedding per level on each path, skip connections, no
attention.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from faasml.exceptions import WorkloadError

SPEED_MEAN, SPEED_SCALE = 8.0, 4.0
"""Wind speeds enter the networks as (s − 8 m/s) / 4 m/s."""
TERRAIN_SCALE = 300.0
"""Terrain enters as its deviation from the patch mean over 300 m."""
RESIDUAL_SCALE = 1.0
"""The diffused residual is HR − bicubic(LR) in units of 1 m/s."""
SCHEDULES = ("linear", "cosine")
PREDICTIONS = ("eps", "x0", "v")
"""What the UNet predicts: the noise ε (Eq. 6.3, DDPM), the clean residual x₀, or
v = √ᾱ ε − √(1−ᾱ) x₀ (Salimans & Ho 2022); the loss is the MSE of that target."""
CLIP = 5.0
"""x̂₀ is clipped to ±5 residual units (m/s) while sampling."""


def upsample(lr: torch.Tensor, scale: int) -> torch.Tensor:
    """Bicubic upsampling (PyTorch's, a = −0.75, half-pixel centres) of (n, 1, m, m) fields."""
    return F.interpolate(lr, scale_factor=scale, mode="bicubic", align_corners=False)


def terrain_input(terrain: torch.Tensor) -> torch.Tensor:
    return (terrain - terrain.mean(dim=(-2, -1), keepdim=True)) / TERRAIN_SCALE


def noise_schedule(kind: str, timesteps: int) -> torch.Tensor:
    """ᾱ_t for t = 0..T−1 (float64)."""
    if kind == "linear":
        betas = torch.linspace(1e-4 * 1000 / timesteps, 0.02 * 1000 / timesteps, timesteps)
        betas = betas.clamp(max=0.999).double()
    elif kind == "cosine":
        s = 0.008
        steps = torch.arange(timesteps + 1, dtype=torch.float64) / timesteps
        f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
        betas = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    else:
        raise WorkloadError(
            f"the value of model.schedule is {kind!r}, but must be one of: {', '.join(SCHEDULES)}"
        )
    return torch.cumprod(1 - betas, dim=0)


class _Block(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, embed: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(min(8, channels_in), channels_in)
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, padding=1)
        self.time = nn.Linear(embed, channels_out)
        self.norm2 = nn.GroupNorm(min(8, channels_out), channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, padding=1)
        self.skip = (
            nn.Conv2d(channels_in, channels_out, 1)
            if channels_in != channels_out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time(embedding)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    """ε_θ(x_t, t, c): ``in_channels`` inputs (x_t and the condition), one output channel."""

    def __init__(self, in_channels: int, width: int = 32, levels: int = 2) -> None:
        super().__init__()
        self.width = width
        embed = 4 * width
        self.embed = nn.Sequential(nn.Linear(width, embed), nn.SiLU(), nn.Linear(embed, embed))
        self.stem = nn.Conv2d(in_channels, width, 3, padding=1)
        chans = [width * 2**i for i in range(levels)]
        self.down = nn.ModuleList()
        self.pool = nn.ModuleList()
        previous = width
        for i, c in enumerate(chans):
            self.down.append(_Block(previous, c, embed))
            if i < levels - 1:
                self.pool.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
            previous = c
        self.middle = _Block(previous, previous, embed)
        self.up = nn.ModuleList()
        self.lift = nn.ModuleList()
        for i in reversed(range(levels)):
            self.up.append(_Block(previous + chans[i], chans[i], embed))
            if i > 0:
                self.lift.append(nn.Conv2d(chans[i], chans[i - 1], 3, padding=1))
            previous = chans[i - 1] if i > 0 else chans[i]
        self.norm = nn.GroupNorm(min(8, chans[0]), chans[0])
        self.head = nn.Conv2d(chans[0], 1, 3, padding=1)
        nn.init.zeros_(self.head.weight)  # ε_θ starts at 0, as in DDPM implementations
        assert self.head.bias is not None
        nn.init.zeros_(self.head.bias)

    def _time(self, t: torch.Tensor) -> torch.Tensor:
        half = self.width // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        angles = t.float()[:, None] * freqs[None, :]
        encoding = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
        if encoding.shape[1] < self.width:
            encoding = F.pad(encoding, (0, self.width - encoding.shape[1]))
        result: torch.Tensor = self.embed(encoding)
        return result

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        embedding = self._time(t)
        h = self.stem(x)
        skips = []
        for i, block in enumerate(self.down):
            h = block(h, embedding)
            skips.append(h)
            if i < len(self.pool):
                h = self.pool[i](h)
        h = self.middle(h, embedding)
        for j, block in enumerate(self.up):
            skip = skips.pop()
            if h.shape[-1] != skip.shape[-1]:
                h = F.interpolate(h, size=skip.shape[-2:], mode="nearest")
            h = block(torch.cat([h, skip], dim=1), embedding)
            if j < len(self.lift):
                h = self.lift[j](h)
        out: torch.Tensor = self.head(F.silu(self.norm(h)))
        return out


class WindSRNet(nn.Module):
    """The conditional DDPM. ``forward(features)`` is the training loss (Eq. 6.3) of a batch of
    WindSR samples (n, 6, size, size) (channels as ``fields.CHANNELS``)."""

    def __init__(
        self,
        scale: int = 4,
        width: int = 32,
        levels: int = 2,
        terrain: bool = True,
        timesteps: int = 1000,
        schedule: str = "linear",
        prediction: str = "x0",
    ) -> None:
        super().__init__()
        if prediction not in PREDICTIONS:
            raise WorkloadError(
                f"the value of model.prediction is {prediction!r}, but must be one of: "
                f"{', '.join(PREDICTIONS)}"
            )
        self.scale, self.use_terrain, self.timesteps = scale, terrain, timesteps
        self.prediction = prediction
        self.unet = UNet(3 if terrain else 2, width, levels)
        self.register_buffer(
            "alphas", noise_schedule(schedule, timesteps).float(), persistent=False
        )

    def condition(self, lr_field: torch.Tensor, terrain: torch.Tensor) -> torch.Tensor:
        """c: the normalised bicubic upsampling of ``lr_field`` (n, 1, size, size, already on
        the HR grid) and the terrain channel."""
        parts = [(lr_field - SPEED_MEAN) / SPEED_SCALE]
        if self.use_terrain:
            parts.append(terrain_input(terrain))
        return torch.cat(parts, dim=1)

    def split(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(HR, bicubic(LR), terrain), each (n, 1, size, size), from a batch of samples."""
        s = self.scale
        hr = features[:, 0:1]
        base = upsample(features[:, 1:2, ::s, ::s], s)
        return hr, base, features[:, 2:3]

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.loss(features, None)

    def loss(self, features: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        hr, base, terrain = self.split(features)
        x0 = (hr - base) / RESIDUAL_SCALE
        n = x0.shape[0]
        t = torch.randint(0, self.timesteps, (n,), generator=generator)
        noise = torch.randn(x0.shape, generator=generator)
        abar = self.get_buffer("alphas")[t][:, None, None, None]
        xt = abar.sqrt() * x0 + (1 - abar).sqrt() * noise
        predicted = self.unet(torch.cat([xt, self.condition(base, terrain)], dim=1), t)
        if self.prediction == "x0":
            target = x0
        elif self.prediction == "v":
            target = abar.sqrt() * noise - (1 - abar).sqrt() * x0
        else:
            target = noise
        return F.mse_loss(predicted, target)

    def _x0_and_eps(
        self, x: torch.Tensor, output: torch.Tensor, a_t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x̂₀, ε̂) from the network's output under the chosen parameterisation."""
        if self.prediction == "x0":
            x0 = output
        elif self.prediction == "v":
            x0 = a_t.sqrt() * x - (1 - a_t).sqrt() * output
        else:
            x0 = (x - (1 - a_t).sqrt() * output) / a_t.sqrt()
        x0 = x0.clamp(-CLIP, CLIP)
        return x0, (x - a_t.sqrt() * x0) / (1 - a_t).sqrt()

    @torch.no_grad()
    def sample(
        self,
        base: torch.Tensor,
        terrain: torch.Tensor,
        steps: int = 3,
        generator: torch.Generator | None = None,
        average: int = 1,
        known: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """HR fields (n, 1, size, size) in m/s: base + DDIM sample of the residual, the mean of
        ``average`` samples (η = 0, ``steps`` steps).

        ``known`` (n, 1, size, size, 1 where the output must equal ``base``, 0 elsewhere)
        in-paints those cells during sampling (RePaint-style, Lugmayr et al. 2022): after each
        step their residual is replaced by 0 noised to the step's level, so the sample agrees
        with ``base`` there and the UNet fits its surroundings to it."""
        if not 1 <= steps <= self.timesteps:
            raise WorkloadError(
                f"the value of steps is {steps}, but must be in [1, {self.timesteps}]"
            )
        cond = self.condition(base, terrain)
        times = torch.linspace(self.timesteps - 1, 0, steps).round().long().tolist()
        total = torch.zeros_like(base)
        for _ in range(average):
            x = torch.randn(base.shape, generator=generator)
            for i, t in enumerate(times):
                a_t = self.get_buffer("alphas")[t]
                a_prev = (
                    self.get_buffer("alphas")[times[i + 1]]
                    if i + 1 < len(times)
                    else torch.tensor(1.0)
                )
                tt = torch.full((x.shape[0],), t, dtype=torch.long)
                output = self.unet(torch.cat([x, cond], dim=1), tt)
                x0, eps = self._x0_and_eps(x, output, a_t)
                x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps
                if known is not None:  # the known residual is 0: only its noise remains
                    x = known * (1 - a_prev).sqrt() * eps + (1 - known) * x
            total += x
        return base + RESIDUAL_SCALE * total / average


class SRCNN(nn.Module):
    """An SRCNN-like baseline (Dong et al. 2014: 9-5-5 convolutions, 64 and 32 maps) on the
    bicubic upsampling, with a global residual output (bicubic + network) and optionally the
    terrain as a second input. ``forward(features)`` is the MSE training loss."""

    def __init__(self, scale: int = 4, terrain: bool = False, width: int = 64) -> None:
        super().__init__()
        self.scale, self.use_terrain = scale, terrain
        self.net = nn.Sequential(
            nn.Conv2d(2 if terrain else 1, width, 9, padding=4),
            nn.ReLU(),
            nn.Conv2d(width, max(1, width // 2), 5, padding=2),
            nn.ReLU(),
            nn.Conv2d(max(1, width // 2), 1, 5, padding=2),
        )
        last = self.net[-1]
        assert isinstance(last, nn.Conv2d)
        nn.init.zeros_(last.weight)  # starts as bicubic upsampling
        assert last.bias is not None
        nn.init.zeros_(last.bias)

    def predict(self, base: torch.Tensor, terrain: torch.Tensor) -> torch.Tensor:
        parts = [(base - SPEED_MEAN) / SPEED_SCALE]
        if self.use_terrain:
            parts.append(terrain_input(terrain))
        residual: torch.Tensor = self.net(torch.cat(parts, dim=1))
        return base + RESIDUAL_SCALE * residual

    def split(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = self.scale
        return features[:, 0:1], upsample(features[:, 1:2, ::s, ::s], s), features[:, 2:3]

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        hr, base, terrain = self.split(features)
        return F.mse_loss(self.predict(base, terrain), hr) / RESIDUAL_SCALE**2


def count_parameters(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))
