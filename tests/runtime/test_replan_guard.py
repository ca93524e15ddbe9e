"""A re-plan never chooses what the budget guard will refuse (issue 34 item 4): the re-plan
prices its choice with the guard's own pricing before taking it. Here the re-plan puts the
last stage on 8 functions that the guard, from an injected measurement of
that allocation, prices at more than the budget left: the run keeps the plan it has and
finishes the last stage, where it used to take the re-plan and stop with money left."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from faasml.job import from_mapping
from faasml.runtime.coordinator import Coordinator
from faasml.runtime.platforms.contract import Platform
from faasml.runtime.runs.session import TuneRun
from faasml.runtime.runs.stage_pricing import keep_warm
from faasml.types import Allocation, Constraint

from .tiny_jobs import four_trial_tune_job

WIDE_N = 8
"""Functions the injected re-plan gives the last stage."""


class _ForcedReplan(TuneRun):
    """A tuning run that re-plans after every stage (δ below 0: any re-prediction moves), whose
    coordinator measured a round on the last stage's allocation widened to WIDE_N functions
    at an hour (an injected measurement: the guard's pricing of that allocation)."""

    delta = -1.0
    wide: Allocation | None = None

    def _open(self) -> tuple[Platform, Coordinator]:
        platform, coordinator = super()._open()
        assert self.wide is not None
        coordinator.estimator.observe_round(self.wide, 3600.0)
        return platform, coordinator


def test_a_replan_the_guard_would_refuse_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = from_mapping(four_trial_tune_job("replan-guard", 1))
    run = _ForcedReplan(job, Constraint(budget_usd=0.02), tmp_path / "run")
    plan = run.plan()
    planned = plan.stages[-1].allocation
    run.wide = wide = dataclasses.replace(planned, n=WIDE_N)

    def widened(*args: Any, **kwargs: Any) -> Any:
        """The re-plan's stages (the planner's, kept on warm functions where that is no
        worse) with the last on WIDE_N functions."""
        chosen = keep_warm(*args, **kwargs)
        return [*chosen[:-1], dataclasses.replace(chosen[-1], allocation=wide)]

    monkeypatch.setattr(
        "faasml.runtime.runs.tune_replan.keep_warm", widened
    )  # the plan is made: only re-plans
    record = run.execute()
    assert record.status == "finished", record.stop_reason
    assert record.stop_reason is None
    assert record.plan is not None and record.plan.stages[-1].allocation == planned
    kept = [t for t in record.trials if t.status == "done"]
    assert len(kept) == plan.stages[-1].trials and all(t.epochs_done == 2 for t in kept)
    refusals = [e.text for e in record.events if "re-plan refused by the budget guard" in e.text]
    assert refusals and str(wide) in refusals[0] and "budget guard: trial" in refusals[0]
