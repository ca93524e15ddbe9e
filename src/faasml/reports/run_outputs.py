"""A run's outputs beside its record: loss curves (``curves/trial-<i>.csv``, in the format the
training simulator reads), plots (``plots/*.png``; needs matplotlib) and ``report.md``.

The runtime writes the record; the runs that ``faasml tune|train|resume``, ``faasml report``
and ``Tuner.fit`` start are given ``write_outputs`` to write these from it.
"""

from __future__ import annotations

from pathlib import Path

from faasml._files import write_atomic
from faasml.reports.run_report import render_report
from faasml.runtime.coordinator.ranking import diverged_at
from faasml.runtime.record.records import RunRecord, TrialRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.sim.curves import CurvePoint, write_curve


def write_outputs(folder: RunDir, record: RunRecord) -> list[Path]:
    """Curves, plots and the Markdown report of a run from its record, into its folder."""
    written = []
    for trial in record.trials:
        curve = _curve(trial, record.kind)
        if curve is not None:
            path = folder.path / "curves" / f"trial-{trial.trial_id}.csv"
            written.append(write_curve(path, curve[0], metadata=curve[1]))
    from faasml.reports.run_plots import write_plots

    plots = write_plots(record, folder.path / "plots")
    from faasml.reports.windsr_maps import write_windsr_maps

    plots += write_windsr_maps(record, folder.path)  # [] unless the model is WindSR's
    written.extend(plots)
    report = folder.path / "report.md"
    write_atomic(report, render_report(record, [p.relative_to(folder.path) for p in plots]))
    written.append(report)
    return written


def _curve(trial: TrialRecord, kind: str) -> tuple[list[CurvePoint], dict[str, str]] | None:
    """A trial's loss curve and its metadata: the epochs before it diverged (a curve holds
    finite losses; the metadata says where it diverged), those with a known loss (a loop
    may report none); None without such an epoch."""
    found = diverged_at(trial.history)
    points = [
        CurvePoint(int(h["epoch"]), float(h["loss"]), float(h["t_s"]), float(h["spent_usd"]))
        for h in trial.history
        if (found is None or h["epoch"] < found[0]) and h.get("loss") is not None
    ]
    if not points:
        return None
    metadata = {"run": kind, "trial": str(trial.trial_id)}
    if found is not None:
        metadata["diverged"] = f"at epoch {found[0]} ({found[1]})"
    return points, metadata
