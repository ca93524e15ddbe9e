"""A run reports each call of the job's probe as it starts and ends, then that it plans
(``BaseRun.on_prepare``): what the console shows during the minute a probe can take."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from faasml.job import load_job
from faasml.runtime.profile.preparing import Planning, Preparing, ProbeStep
from faasml.runtime.runs.session import TuneRun
from faasml.types import Constraint

from .tiny_jobs import four_trial_tune_job


def _planned(folder: Path, *, reprofile: bool) -> tuple[TuneRun, list[Preparing]]:
    folder.mkdir()
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(four_trial_tune_job("probe-steps", 1)))
    run = TuneRun(load_job(path), Constraint(budget_usd=0.05), folder / "run", reprofile=reprofile)
    heard: list[Preparing] = []
    run.on_prepare = heard.append
    run.plan()
    return run, heard


def test_a_measured_job_reports_each_probe_call_then_planning(tmp_path: Path) -> None:
    run, heard = _planned(tmp_path / "first", reprofile=True)
    assert heard[-1] == Planning(cached=False)
    steps = heard[:-1]
    assert steps and all(isinstance(s, ProbeStep) for s in steps)
    probe = [s for s in steps if isinstance(s, ProbeStep)]
    # Each call starts, then ends, before the next starts; numbered 1, 2, ...
    assert [s.done for s in probe] == [False, True] * (len(probe) // 2)
    assert [s.index for s in probe] == [i for i in range(1, len(probe) // 2 + 1) for _ in "se"]
    for start, end in zip(probe[::2], probe[1::2], strict=True):
        assert (start.what, start.functions, start.memory_mb) == (
            end.what,
            end.functions,
            end.memory_mb,
        )
    whats = [s.what for s in probe[::2]]
    assert whats[0] == "footprint and compute" and "synchronised round" in whats
    assert whats[-1] == "warm round trips"
    spent = [s.spent_usd for s in probe]
    assert spent == sorted(spent) and spent[0] == 0.0
    assert run.profile is not None
    assert spent[-1] == pytest.approx(run.profile.profiling_usd)
    elapsed = [s.elapsed_s for s in probe]
    assert elapsed == sorted(elapsed)
    # the profile cached: the next run of the job only plans
    _, again = _planned(tmp_path / "second", reprofile=False)
    assert again == [Planning(cached=True)]
