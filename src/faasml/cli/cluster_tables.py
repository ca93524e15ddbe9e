"""The tables ``faasml cluster simulate`` and ``faasml cluster run`` print (80 columns)."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from faasml.units import format_duration


def policies_table(title: str, results: list[Any]) -> Table:
    """One row per simulated policy: JCTs, queuing, goodput, utilisation, deadlines."""
    table = Table(title=title)
    for column in (
        "policy",
        "avg JCT",
        "p95 JCT",
        "max JCT",
        "avg queue",
        "avg goodput",
        "speedup",
        "util",
        "restarts",
        "deadlines",
        "done",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for result in results:
        s = result.summary()

        def dur(v: float) -> str:
            return "-" if math.isnan(v) else format_duration(v)

        table.add_row(
            result.policy,
            dur(s["avg_jct_s"]),
            dur(s["p95_jct_s"]),
            dur(s["max_jct_s"]),
            dur(s["avg_queue_s"]),
            f"{s['avg_goodput']:.0f}",
            f"{s['avg_speedup']:.2f}",
            f"{100 * s['avg_utilization']:.0f}%",
            f"{s['restarts']:.0f}",
            "-" if math.isnan(s["deadline_met"]) else f"{100 * s['deadline_met']:.0f}%",
            f"{s['completed']:.0f}/{s['jobs']:.0f}",
        )
    return table


def print_loans(out: Any, results: list[Any], services: list[Any], loaning: str) -> None:
    """The inference services' SLO attainment and the FaPES-Manager's loans, per policy."""
    table = Table(
        title=f"{len(services)} inference service(s), loaning {loaning}: SLO attainment "
        "and FaPES-Manager events"
    )
    for column in (
        "policy",
        "SLO reqs",
        "SLO time",
        "reserve",
        "loaned",
        "reclaimed",
        "preempted",
        "lost GPU-s",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for result in results:
        s = result.summary()
        table.add_row(
            result.policy,
            f"{100 * s['slo_requests']:.2f}%",
            f"{100 * s['slo_time']:.2f}%",
            f"{s['inference_reserve_servers']:.0f}",
            f"{s['servers_loaned']:.0f}",
            f"{s['servers_reclaimed']:.0f}",
            f"{s['reclaim_preemptions']:.0f}",
            f"{s['reclaim_lost_gpu_s']:.0f}",
        )
    out.print(table)


def print_real(out: Any, result: Any, jobs: int, config: Any, services: list[Any]) -> None:
    """The real run's jobs as a table, and its inference serving in a line."""
    summary = result.summary()
    table = Table(title=f"real run on Ray: {jobs} jobs, policy {result.policy}")
    for column in ("job", "JCT", "steps", "restarts", "reclaimed", "loss first", "loss last"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for job in result.jobs:
        table.add_row(
            job.name,
            "-" if job.jct is None else format_duration(job.jct),
            str(job.steps),
            str(job.restarts),
            str(job.reclaim_preemptions),
            f"{job.first_loss:.3f}",
            f"{job.last_loss:.3f}",
        )
    out.print(table)
    if services:
        out.print(
            f"inference sized by forecast {result.forecast} × {result.headroom:g} "
            f"(start {result.inference_start_s:g} s), loaning {config.loaning}: "
            f"requests {summary['requests']:.0f}, within SLO "
            f"{100 * summary['slo_requests']:.1f}%, latency p50 "
            f"{summary['p50_latency_ms']:.0f} ms p99 {summary['p99_latency_ms']:.0f} ms; "
            f"servers loaned {summary['servers_loaned']:.0f}, "
            f"reclaimed {summary['servers_reclaimed']:.0f}"
        )


def print_prediction(out: Any, model: Any, cmp: Any, calibration: Any) -> None:
    """The simulator's prediction beside the measured run (80 columns)."""
    from faasml.cluster.ray_predict import fit_errors

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:+.1f}%"

    def dur(v: float | None) -> str:
        return "-" if v is None else format_duration(v)

    table = Table(title="predicted (simulator) vs measured; run = time holding GPUs")
    for column in ("job", "JCT pred", "JCT meas", "error", "run pred", "run meas"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for row in (*cmp.jobs, cmp.avg_jct):
        table.add_row(
            row.name,
            dur(row.predicted_s),
            dur(row.measured_s),
            pct(row.error),
            dur(row.predicted_running_s),
            dur(row.measured_running_s),
        )
    out.print(table)
    if cmp.slo_predicted is not None and cmp.slo_measured is not None:
        out.print(
            f"requests within SLO: predicted {100 * cmp.slo_predicted:.1f}%, measured "
            f"{100 * cmp.slo_measured:.1f}% (error {pct(cmp.slo_error)})"
        )
    out.print(f"restarts: predicted {cmp.restarts_predicted}, measured {cmp.restarts_measured}")
    mean_round = cmp.mean_round_measured_s
    out.print(
        f"rounds: predicted {cmp.rounds_predicted}, measured {cmp.rounds_measured}"
        + ("" if mean_round is None else f" ({mean_round:.2f} s apart on average)")
    )
    c = model.comm
    worst = max((abs(e) for e in fit_errors(model, calibration)), default=0.0)
    out.print(
        f"fitted step: {1000 * model.compute_s:.1f} ms on 1 GPU, + {1000 * c.intra0:.1f} "
        f"+ {1000 * c.intra1:.1f} ms/extra GPU on one server,\n"
        f"  + {1000 * c.inter0:.1f} + {1000 * c.inter1:.1f} ms/extra server on several "
        f"(fit error ≤ {100 * worst:.0f}%, {len(calibration.steps)} layouts)"
    )
    out.print(
        f"restart: {model.restart_s:.2f} s (median of {len(calibration.restarts_s)}: "
        f"{', '.join(f'{r:.2f}' for r in calibration.restarts_s)})"
    )
