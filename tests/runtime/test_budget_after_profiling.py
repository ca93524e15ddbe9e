"""A budget that measuring the job leaves too little of is refused with what the measuring cost
and the least budget for the run after it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from faasml.exceptions import InfeasibleConstraintError
from faasml.job import from_mapping
from faasml.runtime.runs.session import TuneRun
from faasml.types import Constraint

from .tiny_jobs import tiny_tune_job


def _money(text: str, before: str) -> float:
    found = re.search(re.escape(before) + r" \$([0-9.]+)", text)
    assert found is not None, text
    return float(found.group(1))


def test_the_refusal_says_what_profiling_cost_of_the_budget(tmp_path: Path) -> None:
    job = tiny_tune_job("profiled-then-refused")
    job["tuning"]["epochs_per_stage"] = 20000  # a run far dearer than measuring the job
    run = TuneRun(from_mapping(job), Constraint(budget_usd=0.002), tmp_path / "run", reprofile=True)
    with pytest.raises(InfeasibleConstraintError) as caught:
        run.plan()
    message = str(caught.value)
    profiling = run.meter.total_usd
    assert 0 < profiling < 0.002
    assert "of your $0.002000 budget" in message
    assert _money(message, "profiling cost") == pytest.approx(profiling, abs=1e-6)
    after = _money(message, "the least budget that works for the run after profiling is")
    assert after > 0.002 - profiling
    total = _money(message, "(total")
    # money prints 6 decimals below $0.01 and 4 from there: the total is exact to its print
    assert total == pytest.approx(profiling + after, abs=2e-6 if total < 0.01 else 6e-5)
    assert caught.value.least_budget_usd == pytest.approx(total, abs=1e-6)
