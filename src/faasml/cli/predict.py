"""`faasml predict RUN_DIR --input LR.nc --output OUT.nc`: apply a WindSR run's model to new files.

The best trial's checkpoint (or ``--trial N``'s last) is read from the run directory's object
store as the run stored it (npz, never unpickled) into the model the trial trained (the job's
``model:`` with the trial's configuration), applied to the input's low-resolution fields, and
written as CF-1.8 NetCDF: ``wind_speed`` (plain super-resolution) and, where there are
stations (``--stations FILE`` or the input's own), ``wind_speed_assimilated``, assimilated as
the job's ``assimilate:`` section says (its defaults otherwise).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.markup import escape

from faasml.cli._common import console
from faasml.exceptions import ConfigError
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir

MODELS = ("windsr", "windsr-srcnn")


def register(commands: Any) -> None:
    text = "apply a WindSR run's model to new low-resolution NetCDF / HDF5 files"
    predict = commands.add_parser("predict", help=text, description=text[0].upper() + text[1:])
    predict.add_argument("run_dir", help="the run directory (it holds record.json)")
    predict.add_argument("--input", required=True, help="low-resolution file (docs/windsr.md)")
    predict.add_argument("--output", required=True, help="the NetCDF file to write")
    predict.add_argument("--stations", help="a stations file to assimilate (docs/windsr.md)")
    predict.add_argument("--trial", type=int, help="this trial's checkpoint (default: the best)")
    predict.set_defaults(func=run_predict)


@dataclass(frozen=True)
class Chosen:
    """The trial whose checkpoint is applied, and the model it trained."""

    trial: int
    checkpoint: str
    model: str
    options: dict[str, Any]


def choose(record: RunRecord, run_dir: str, trial: int | None) -> Chosen:
    """The best trial (or ``trial``) of a WindSR run, its checkpoint and model options."""
    from faasml.workloads.windsr.inference import trial_model

    name = trial_model(record.job, {})[0]
    if name not in MODELS:
        raise ConfigError(
            f"{run_dir} holds a run of model {name!r}, but faasml predict applies "
            f"the WindSR models ({', '.join(MODELS)})"
        )
    if trial is None:
        if record.best is None or not record.best.checkpoint:
            raise ConfigError(f"{run_dir} has no best trial with a checkpoint yet")
        trial, key, config = record.best.trial, record.best.checkpoint, record.best.config
    else:
        found = next((t for t in record.trials if t.trial_id == trial), None)
        if found is None or not found.checkpoint:
            ids = ", ".join(str(t.trial_id) for t in record.trials if t.checkpoint) or "none"
            raise ConfigError(
                f"the value of --trial is {trial}, but must be a trial of {run_dir} with a "
                f"checkpoint ({ids})"
            )
        key, config = found.checkpoint, found.config
    name, options = trial_model(record.job, config)
    return Chosen(trial, key, name, options)


def run_predict(args: argparse.Namespace) -> int:
    from faasml.runtime.function.checkpoint import load_checkpoint
    from faasml.sync.stores import open_store
    from faasml.workloads import create_model
    from faasml.workloads.windsr.assimilate import read_assimilation
    from faasml.workloads.windsr.inference import read_inputs, read_stations, write_prediction
    from faasml.workloads.windsr.model import WindModel

    folder = RunDir(args.run_dir)
    record = folder.read_record()
    chosen = choose(record, args.run_dir, args.trial)
    setting = read_assimilation(
        {**dict(record.job.get("assimilate") or {}), "stations": "data"}, "assimilate"
    )
    scale = int(chosen.options.get("scale", 4))
    inputs = read_inputs(args.input, scale, bool(chosen.options.get("terrain", True)))
    patches = inputs.patches
    if args.stations:
        stations = read_stations(args.stations, len(patches), patches.size)
        assert stations.speeds is not None
        patches = replace(patches, rows=stations.rows, cols=stations.cols, readings=stations.speeds)
    model = create_model(chosen.model, (6, patches.size, patches.size), 2, **chosen.options)
    assert isinstance(model, WindModel)
    objects = (folder.path / "objects").resolve()
    if not objects.is_dir():
        raise ConfigError(f"{args.run_dir} holds no objects/ folder: its checkpoints are gone")
    with open_store(f"embedded://{objects}") as store:  # npz as the run stored it, no pickle
        params = load_checkpoint(store, chosen.checkpoint).params
    fields = {"wind_speed": (model.predict(params, patches), "super-resolved wind speed")}
    if patches.rows.size:
        assimilated = model.predict(
            params,
            patches,
            assimilate=setting.radius,
            inpaint=setting.inpaint,
            strength=setting.strength,
        )
        fields["wind_speed_assimilated"] = (
            assimilated,
            "super-resolved wind speed with station observations assimilated",
        )
    source = f"faasml predict: model {chosen.model}, trial {chosen.trial} of {folder.path.name}"
    write_prediction(
        args.output,
        inputs,
        fields,
        {
            "title": "WindSR super-resolved wind speed",
            "source": source,
            "faasml_checkpoint": chosen.checkpoint,
            "faasml_assimilation": f"radius {setting.radius}, strength {setting.strength:g}, "
            f"inpaint {str(setting.inpaint).lower()}"
            if patches.rows.size
            else "none (no stations)",
        },
    )
    console().print(
        escape(
            f"Wrote {Path(args.output)}: {', '.join(fields)} for {len(patches)} sample(s) of "
            f"{patches.size}×{patches.size} (trial {chosen.trial}, {chosen.model})"
        ),
        soft_wrap=True,
    )
    return 0
