"""What ``faasml tune|train|resume`` show while a run prepares and runs.

On a terminal: the probe's steps as they happen and a live line while it measures and plans;
during the run, a status line (stage, trials alive, spend against the budget, elapsed time
as H:MM:SS), the time the plan leaves by stage, and a table of the trials ranked by the run's
metric and mode. Piped (not a terminal): no animation, one plain line per probe step and per
stage event. Lines wrap at word boundaries only (a word longer than the line, such as a long
path, is folded); a table too long for the screen shows its best rows and says how many more.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from faasml.cli._common import say
from faasml.reports.run_format import money, number, run_metric, trial_usd
from faasml.runtime.profile.preparing import Planning, Preparing, ProbeStep
from faasml.runtime.record.records import PlanRecord, StageRecord

if TYPE_CHECKING:
    from faasml.runtime.runs.base import Snapshot
    from faasml.runtime.runs.session import BaseRun

REFRESH_PER_S = 4
STAGE_START = re.compile(r"stage \d+: \d+ trials? on ")
"""The record's event of a stage starting."""


def clock(seconds: float) -> str:
    """Seconds as H:MM:SS, always whole (never cut to fit)."""
    whole = max(int(seconds), 0)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


@dataclass(frozen=True)
class StageLeft:
    """A stage's planned time still to run."""

    index: int
    seconds: float
    over: bool = False
    """The stage under way has run past its planned time."""


def _latest_s(stage: StageRecord) -> float:
    """A stage's time as the run last predicted it: re-predicted after re-calibration, else as
    re-planned or predicted, else the planner's."""
    estimate = stage.repredicted or stage.run_estimate()
    return stage.time_s if estimate is None else estimate.time_s


def time_left(plan: PlanRecord, under_way: int, in_stage_s: float) -> list[StageLeft]:
    """The plan's time still to run, by stage: the stage under way (0-based ``under_way``)
    less the ``in_stage_s`` it has run (never below 0), then each later stage with the plan's
    time between stages before it. Stages done are left out."""
    between = plan.between_stages_s or 0.0
    out = []
    for offset, stage in enumerate(plan.stages[under_way:]):
        planned = _latest_s(stage)
        if offset == 0:
            out.append(StageLeft(stage.index, max(planned - in_stage_s, 0.0), in_stage_s > planned))
        else:
            out.append(StageLeft(stage.index, planned + between))
    return out


def eta_line(left: list[StageLeft]) -> str:
    """'ETA 0:01:05 by the plan (stage 2: 0:00:20 left, 3: 0:00:45)'."""
    if not left:
        return "ETA: the plan's stages are done"
    parts = []
    for k, stage in enumerate(left):
        name = f"stage {stage.index}" if k == 0 else str(stage.index)
        shown = "over its plan" if stage.over else clock(stage.seconds)
        parts.append(f"{name}: {shown}{' left' if k == 0 and not stage.over else ''}")
    total = clock(sum(s.seconds for s in left))
    return f"ETA {total} by the plan ({', '.join(parts)})"


class PrepareDisplay:
    """The job's measurement and planning as they happen (``BaseRun.on_prepare``)."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.began = time.monotonic()
        self.now = "Measuring the job:"
        self.live: Live | None = None

    def __enter__(self) -> PrepareDisplay:
        if self.out.is_terminal:
            self.live = Live(
                self, console=self.out, refresh_per_second=REFRESH_PER_S, transient=True
            )
            self.live.start(refresh=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def __call__(self, event: Preparing) -> None:
        if isinstance(event, Planning):
            self.now = "Planning:"
            if not self.out.is_terminal:
                self.out.print("planning")
            return
        assert isinstance(event, ProbeStep)
        where = f"{event.functions} × {event.memory_mb} MB"
        if not event.done:
            self.now = f"Measuring, step {event.index}: {event.what} on {where}"
            if not self.out.is_terminal:
                self.out.print(escape(f"probe step {event.index}: {event.what} on {where}"))
            return
        if self.out.is_terminal:  # a line that stays above the live one
            self.out.print(
                escape(
                    f"  probe step {event.index} done: {event.what}, {where} "
                    f"({clock(event.elapsed_s)}, {money(event.spent_usd)} so far)"
                )
            )

    def __rich__(self) -> RenderableType:
        elapsed = clock(time.monotonic() - self.began)
        return Spinner("dots", text=Text(f"{self.now} {elapsed}"))


class RunDisplay:
    """The run as it goes (``BaseRun.progress``): live on a terminal, a line per stage
    event when piped. Piped, the line per trial result is not printed here: the run's trial
    events print it (``run_options.print_trial_lines``)."""

    def __init__(self, run: BaseRun, out: Console) -> None:
        self.run, self.out = run, out
        record = run.record
        self.origin = time.monotonic() - record.elapsed_s
        """When the run began, as this process counts (a resumed run began before it)."""
        self.stage = record.stage
        self.stage_began_s = self._stage_began(record.stage, record.elapsed_s)
        self.events_seen = len(record.events)
        plan = record.plan
        self.alive = len(run.trials)
        if plan is not None and record.stage < len(plan.stages):
            self.alive = plan.stages[record.stage].trials
        self.live: Live | None = None

    def __enter__(self) -> RunDisplay:
        if self.out.is_terminal:
            self.live = Live(
                self,
                console=self.out,
                refresh_per_second=REFRESH_PER_S,
                transient=False,
                vertical_overflow="visible",
            )
            self.live.start(refresh=True)
        self._stage_line()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def elapsed(self) -> float:
        """The run's time: counted on between segments, still once the run has ended."""
        record = self.run.record
        if record.status not in ("planned", "running"):
            return record.elapsed_s
        return time.monotonic() - self.origin

    def tick(self, snapshot: Snapshot) -> None:
        """After each segment: the stage under way, and the record's new events (piped, the
        stage's start is one line: ``_stage_line``)."""
        stage, elapsed = snapshot.stage - 1, snapshot.elapsed_s
        self.origin = time.monotonic() - elapsed  # the run's own clock
        self.alive = snapshot.alive
        events = self.run.record.events
        for event in events[self.events_seen :]:
            if not self.out.is_terminal and STAGE_START.match(event.text):
                continue  # the stage's line says it
            stamp = f"[{clock(event.t_s)}] "
            say(self.out, stamp + event.text, indent=len(stamp))
        self.events_seen = len(events)
        if stage != self.stage:
            self.stage, self.stage_began_s = stage, self._stage_began(stage, elapsed)
            self._stage_line()

    def _stage_began(self, stage: int, otherwise: float) -> float:
        """When the 0-based ``stage`` began: its start event's time in the record (the
        latest), else ``otherwise``."""
        starts = [
            e.t_s for e in self.run.record.events if e.text.startswith(f"stage {stage + 1}: ")
        ]
        return starts[-1] if starts else otherwise

    def _stage_line(self) -> None:
        """Piped: a stage's start as one line (trials alive, spend, the plan's time left)."""
        plan = self.run.record.plan
        if self.out.is_terminal or plan is None or self.stage >= len(plan.stages):
            return
        where = f"stage {self.stage + 1}/{len(plan.stages)}"
        line = f"{where}: {self.alive} alive, {self._spend()}, {self._eta(short=True)}"
        self.out.print(escape(line))

    def _spend(self) -> str:
        spent = money(self.run.meter.total_usd)
        budget = self.run.constraint.budget_usd
        return f"spent {spent}" + ("" if budget is None else f" of {money(budget)}")

    def _eta(self, *, short: bool = False) -> str:
        """The plan's time left, by stage (``short``: the total only)."""
        plan = self.run.record.plan
        if plan is None:
            return "no plan"
        if self.run.record.status not in ("planned", "running"):
            return eta_line([])
        left = time_left(plan, self.stage, self.elapsed() - self.stage_began_s)
        if short:
            return f"ETA {clock(sum(s.seconds for s in left))}"
        return eta_line(left)

    def status(self) -> str:
        plan = self.run.record.plan
        stages = len(plan.stages) if plan is not None else 1
        return (
            f"stage {min(self.stage + 1, stages)}/{stages} · {self.alive} alive · "
            f"{self._spend()} · {clock(self.elapsed())}"
        )

    def trial_table(self, rows: int) -> list[RenderableType]:
        """The trials best first by the run's metric and mode, at most ``rows`` of them."""
        record = self.run.record
        metric = run_metric(record)
        usd = trial_usd(record)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("trial", justify="right", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column(metric.heading, justify="right", no_wrap=True)
        table.add_column("epochs", justify="right", no_wrap=True)
        table.add_column("cost", justify="right", no_wrap=True)
        ranked = metric.ranked(record.trials)
        for t in ranked[:rows]:
            table.add_row(
                str(t.trial_id),
                t.status,
                number(metric.last(t)),
                str(t.epochs_done),
                money(usd.get(t.trial_id, 0.0)),
            )
        more = len(ranked) - rows
        shown: list[RenderableType] = [table]
        if more > 0:
            shown.append(Text(f"and {more} more (the report lists every trial)"))
        return shown

    def __rich__(self) -> RenderableType:
        rows = max(3, self.out.size.height - 9)
        return Group(Text(self.status()), Text(self._eta()), *self.trial_table(rows))
