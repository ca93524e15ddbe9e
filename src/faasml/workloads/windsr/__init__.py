"""WindSR: diffusion super-resolution of wind fields with terrain and data assimilation.

The workload of dissertation Chapter 6 (docs/windsr.md): seeded synthetic wind fields over
generated terrain (``fields``), readers and writers of its HDF5 / NetCDF layout (``files``),
the dynamic-impact-radius assimilation (``assimilate``), the conditional DDPM and the SR-CNN
baseline in PyTorch (``diffusion``), PSNR / SSIM / site error (``metrics``) and the faasml
models ``windsr`` and ``windsr-srcnn`` (``model``). Only the NumPy parts are imported here;
``diffusion`` and ``model`` import torch when used.
"""

from __future__ import annotations

from faasml.workloads.windsr.fields import CHANNELS, WindPatches, generate_patches, wind_sr
from faasml.workloads.windsr.files import read_patches, read_windsr, write_patches

__all__ = [
    "CHANNELS",
    "WindPatches",
    "generate_patches",
    "read_patches",
    "read_windsr",
    "wind_sr",
    "write_patches",
]
