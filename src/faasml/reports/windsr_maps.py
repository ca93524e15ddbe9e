"""The WindSR plot of a run report: LR / SR / HR / error maps of held-out patches.

For a run whose model is ``windsr`` or ``windsr-srcnn``, the best checkpoint and the held-out
set are read back from the run's embedded object store, the first patches are super-resolved
(DDIM with the model's ``sample_steps`` for WindSR) with the model the best trial trained,
and drawn in rows: the low-resolution input, the super-resolved field, the high-resolution
truth (m/s, one colour scale per row) and SR − HR (m/s), with each patch's PSNR in the title;
for a job with ``assimilate:``, the field with the stations assimilated beside them. Needs
matplotlib; none otherwise.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from faasml.runtime.record.records import RunRecord

MODELS = ("windsr", "windsr-srcnn")
TEST_KEY = "run/data/test"
"""Where the run's coordinator keeps the held-out set (namespace ``run``)."""


def write_windsr_maps(record: RunRecord, run_path: Path, patches: int = 3) -> list[Path]:
    """``plots/windsr-maps.png`` for a WindSR run with a checkpoint; [] for any other run."""
    from faasml.workloads.windsr.inference import trial_model

    if record.best is None or not record.best.checkpoint:
        return []
    key = record.best.checkpoint
    name, options = trial_model(record.job, record.best.config)
    if name not in MODELS:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    from faasml.runtime.function.checkpoint import load_checkpoint
    from faasml.sync.stores import open_store
    from faasml.workloads import create_model
    from faasml.workloads.data import dataset_from_bytes
    from faasml.workloads.windsr import metrics
    from faasml.workloads.windsr.fields import patches_from_dataset
    from faasml.workloads.windsr.model import WindModel

    store = open_store(f"embedded://{(run_path / 'objects').resolve()}")
    data = store.get(TEST_KEY)
    if data is None:
        return []
    test = dataset_from_bytes(data)
    model = create_model(name, test.input_shape, test.num_classes, **options)
    assert isinstance(model, WindModel)
    chosen = patches_from_dataset(test.subset(slice(0, patches)), model.scale)
    params = load_checkpoint(store, key).params
    sr = model.predict(params, chosen)
    assimilated = _assimilated(record, model, params, chosen)
    folder = run_path / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    rows = len(chosen)
    columns = 4 if assimilated is None else 5
    fig, axes = plt.subplots(rows, columns, figsize=(2.5 * columns, 2.6 * rows), squeeze=False)
    for i in range(rows):
        hr = chosen.hr[i]
        low, high = float(hr.min()), float(hr.max())
        error = sr[i] - hr
        bound = float(np.abs(error).max()) or 1.0
        score = metrics.psnr(hr[None], sr[i][None])
        panels = [
            (chosen.lr[i], f"LR ({chosen.lr.shape[-1]}×{chosen.lr.shape[-1]})", "viridis"),
            (sr[i], f"SR, {score:.1f} dB", "viridis"),
            (hr, f"HR ({hr.shape[-1]}×{hr.shape[-1]})", "viridis"),
            (error, "SR − HR", "RdBu_r"),
        ]
        if assimilated is not None:
            with_obs = metrics.psnr(hr[None], assimilated[i][None])
            panels.insert(2, (assimilated[i], f"SR + stations, {with_obs:.1f} dB", "viridis"))
        for ax, (image, title, cmap) in zip(axes[i], panels, strict=True):
            limits = (-bound, bound) if cmap == "RdBu_r" else (low, high)
            shown = ax.imshow(image, cmap=cmap, vmin=limits[0], vmax=limits[1])
            ax.set_title(title, fontsize="small")
            ax.set_xticks([])
            ax.set_yticks([])
            fig.colorbar(shown, ax=ax, fraction=0.046, pad=0.04, label="m/s")
    fig.suptitle(f"{name}: held-out patches (best checkpoint)")
    fig.tight_layout()
    path = folder / "windsr-maps.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]


def _assimilated(record: RunRecord, model: Any, params: Any, chosen: Any) -> Any:
    """The patches super-resolved with stations assimilated as the job's ``assimilate:`` says
    (the stations the run evaluated with); None without the section or stations."""
    section = record.job.get("assimilate")
    if not isinstance(section, dict):
        return None
    from faasml.exceptions import FaasmlError
    from faasml.workloads.windsr import assimilate as da
    from faasml.workloads.windsr.inference import read_stations

    stations = section.get("stations", "data")
    if isinstance(stations, str) and stations != "data":
        try:  # the station network's file, as the run read it
            found = read_stations(stations, None, None)
            stations = [[r, c] for r, c in zip(found.rows[0], found.cols[0], strict=True)]
        except FaasmlError:
            return None
    setting = da.read_assimilation({**section, "stations": stations}, "assimilate")
    rows, cols, readings = da.stations_for(
        setting, chosen.truth, chosen.rows, chosen.cols, chosen.readings
    )
    if not rows.size:
        return None
    with_obs = dataclasses.replace(chosen, rows=rows, cols=cols, readings=readings)
    return model.predict(
        params,
        with_obs,
        assimilate=setting.radius,
        inpaint=setting.inpaint,
        strength=setting.strength,
    )
