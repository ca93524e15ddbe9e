"""The report of a workflow run's deployment searches: per phase, the configurations probed
with their measured throughput and cost, the choice, the search cost and the re-triggers, and
a plot like SMLT Figs. 13–14 (what changed, workers and throughput over time)."""

from __future__ import annotations

from pathlib import Path

from faasml.reports.run_format import money, seconds
from faasml.runtime.record.records import PhaseRecord, RunRecord
from faasml.types import Allocation


def _allocation(a: Allocation) -> str:
    return f"{a.n} × {a.memory_mb} MB, {a.storage}/{a.scheme}"


def _what(phase: PhaseRecord) -> str:
    model = {k: v for k, v in phase.model.items() if k != "name"}
    name = phase.model.get("name")
    return f"batch {phase.batch_size}, {phase.samples:,} samples, {name} {model}"


def workflow_lines(record: RunRecord) -> list[str]:
    """Markdown lines of the searches of a workflow run (none for other runs)."""
    flow = record.workflow
    if flow is None:
        return []
    phases = flow.all_phases()
    search = sum(p.search_usd for p in phases)
    bill = record.bill_usd()
    share = f" ({search / bill:.0%} of the bill)" if bill > 0 else ""
    triggers = sum(1 for p in phases if p.retrigger)
    lines = [
        "",
        f"## Deployment search ({flow.kind})",
        "",
        f"Search cost {money(search)}{share}; {len(phases)} phase(s), {triggers} re-trigger(s).",
        "",
        "| phase | change | search | probes | search cost | choice | samples/s | training bill |",
        "|---:|---|---|---:|---:|---|---:|---:|",
    ]
    for p in phases:
        rates = [h["samples_per_s"] for h in p.epochs_run if h.get("samples_per_s")]
        rate = f"{sum(rates) / len(rates):,.0f}" if rates else "-"
        how = "re-triggered" if p.retrigger else ("first" if p.searched else "kept")
        lines.append(
            f"| {p.index} | {p.change or '-'} | {how}: {p.stop_reason or '-'} | "
            f"{len(p.probes)} | {money(p.search_usd)} | "
            f"{_allocation(p.choice) if p.choice is not None else '-'} | {rate} | "
            f"{money(p.train_usd or 0.0)} |"
        )
    for p in phases:
        if not p.probes:
            continue
        lines += [
            "",
            f"Phase {p.index} probes ({_what(p)}):",
            "",
            "| probe | allocation | epoch (measured) | epoch (model) | samples/s | epoch cost "
            "| probe time | probe cost |",
            "|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        for i, q in enumerate(p.probes, 1):
            measured = "-" if q.epoch_s is None else seconds(q.epoch_s)
            rate = "-" if q.samples_per_s is None else f"{q.samples_per_s:,.0f}"
            cost = "-" if q.epoch_usd is None else money(q.epoch_usd)
            failed = f" (failed: {q.failed})" if q.failed else ""
            lines.append(
                f"| {i} | {_allocation(q.allocation)}{failed} | {measured} | "
                f"{seconds(q.predicted_epoch_s)} | {rate} | {cost} | "
                f"{seconds(q.probe_s)} | {money(q.probe_usd)} |"
            )
    return lines


def write_search_plot(record: RunRecord, folder: Path) -> list[Path]:
    """'workflow.png': what changed, workers and throughput per epoch over time (SMLT Figs.
    13–14); none without matplotlib or a workflow."""
    flow = record.workflow
    if flow is None or not flow.all_phases():
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    kind = flow.kind
    label = {"dynamic-batching": "batch size", "nas": "model parameters (MB)"}.get(
        kind, "training samples"
    )
    xs: list[float] = []
    changed: list[float] = []
    workers: list[int] = []
    rates: list[float] = []
    for p in flow.all_phases():
        for h in p.epochs_run:
            xs.append(h["t_s"])
            if kind == "dynamic-batching":
                changed.append(p.batch_size)
            elif kind == "nas":
                changed.append(p.model_mb)
            else:
                changed.append(p.samples)
            workers.append(h["n"])
            rates.append(h.get("samples_per_s") or 0.0)
    if not xs:
        return []
    fig, axes = plt.subplots(3, 1, figsize=(6, 6), sharex=True)
    for ax, values, name in zip(
        axes, (changed, workers, rates), (label, "workers", "samples/s"), strict=True
    ):
        ax.step(xs, values, where="pre", marker="o")
        ax.set_ylabel(name)
    for p in flow.all_phases():
        for ax in axes:
            ax.axvline(p.t_start_s, color="grey", linestyle=":", linewidth=0.8)
    axes[-1].set_xlabel("seconds (dotted: a phase starts; its search runs first)")
    axes[0].set_title(f"Workflow ({kind})")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "workflow.png"
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]
