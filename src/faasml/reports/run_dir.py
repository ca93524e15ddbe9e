"""The run directory: a JSON record, a Markdown report, loss curves and plots.

Layout: ``record.json`` (the whole state, rewritten atomically after every segment, so a
resumed run starts from it), ``report.md`` (plan against actual time and bill, best
configuration, restarts, failures), ``curves/trial-<i>.csv`` (loss curves in the format the
training simulator reads, ``faasml.sim.curves``), ``plots/*.png`` (loss curves, spend over
time, allocation over time; needs matplotlib) and ``objects/`` (the embedded object store:
data partitions and checkpoints).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from faasml.exceptions import ConfigError
from faasml.reports.run_report import render_report
from faasml.sim.curves import CurvePoint, write_curve


class RunDir:
    """One run's folder."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def record_path(self) -> Path:
        return self.path / "record.json"

    def write_record(self, state: dict[str, Any]) -> None:
        """Write ``record.json`` atomically (temporary file, fsync, rename)."""
        self.path.mkdir(parents=True, exist_ok=True)
        text = json.dumps(state, indent=1, default=_plain)
        handle, temporary = tempfile.mkstemp(prefix=".record.", dir=self.path)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.record_path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def read_record(self) -> dict[str, Any]:
        if not self.record_path.exists():
            raise ConfigError(f"{self.path} is not a run directory: it has no record.json")
        try:
            data: dict[str, Any] = json.loads(self.record_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ConfigError(f"{self.record_path} is not valid JSON: {err}") from None
        return data

    def sync_dir(self) -> Path:
        """Where the parameter store keeps gradients: tmpfs when there is one."""
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
        digest = hashlib.sha1(str(self.path.resolve()).encode()).hexdigest()[:12]
        folder = base / f"faasml-sync-{digest}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def write_outputs(self, state: dict[str, Any]) -> list[Path]:
        """Curves, plots and the Markdown report from a record."""
        written = []
        for trial in state.get("trials", []):
            history = trial.get("history", [])
            if not history:
                continue
            points = [
                CurvePoint(
                    int(h["epoch"]), float(h["loss"]), float(h["t_s"]), float(h["spent_usd"])
                )
                for h in history
            ]
            written.append(
                write_curve(
                    self.path / "curves" / f"trial-{trial['trial_id']}.csv",
                    points,
                    metadata={"run": state.get("kind", ""), "trial": str(trial["trial_id"])},
                )
            )
        from faasml.reports.run_plots import write_plots

        plots = write_plots(state, self.path / "plots")
        written.extend(plots)
        report = self.path / "report.md"
        report.write_text(render_report(state, [p.relative_to(self.path) for p in plots]))
        written.append(report)
        return written


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to a run record")
