"""The report of a workflow run's deployment searches: per phase, the configurations probed
with their measured throughput and cost, the choice, the search cost and the re-triggers, and
a plot like SMLT Figs. 13–14 (what changed, workers and throughput over time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faasml.units import format_duration, format_money


def _allocation(a: dict[str, Any]) -> str:
    return f"{a['n']} × {a['memory_mb']} MB, {a['storage']}/{a['scheme']}"


def _what(phase: dict[str, Any]) -> str:
    model = {k: v for k, v in phase["model"].items() if k != "name"}
    name = phase["model"]["name"]
    return f"batch {phase['batch_size']}, {phase['samples']:,} samples, {name} {model}"


def _phases(flow: dict[str, Any]) -> list[dict[str, Any]]:
    """The finished phases and the one under way when the run stopped (if any)."""
    current = flow.get("current")
    return list(flow.get("phases", [])) + ([current] if current else [])


def workflow_lines(state: dict[str, Any]) -> list[str]:
    """Markdown lines of the searches of a workflow run (none for other runs)."""
    flow = state.get("workflow")
    if not flow:
        return []
    phases = _phases(flow)
    search = sum(p.get("search_usd", 0.0) for p in phases)
    bill = sum(c["usd"] for c in state.get("charges", []))
    share = f" ({search / bill:.0%} of the bill)" if bill > 0 else ""
    triggers = sum(1 for p in phases if p.get("retrigger"))
    lines = [
        "",
        f"## Deployment search ({flow.get('kind')})",
        "",
        f"Search cost {format_money(search)}{share}; {len(phases)} phase(s), "
        f"{triggers} re-trigger(s).",
        "",
        "| phase | change | search | probes | search cost | choice | samples/s | training bill |",
        "|---:|---|---|---:|---:|---|---:|---:|",
    ]
    for p in phases:
        epochs = p.get("epochs_run", [])
        rates = [h["samples_per_s"] for h in epochs if h.get("samples_per_s")]
        rate = f"{sum(rates) / len(rates):,.0f}" if rates else "-"
        how = "re-triggered" if p.get("retrigger") else ("first" if p.get("searched") else "kept")
        lines.append(
            f"| {p['index']} | {p.get('change') or '-'} | {how}: {p.get('stop_reason', '-')} | "
            f"{len(p.get('probes', []))} | {format_money(p.get('search_usd', 0.0))} | "
            f"{_allocation(p['choice']) if 'choice' in p else '-'} | {rate} | "
            f"{format_money(p.get('train_usd', 0.0))} |"
        )
    for p in phases:
        if not p.get("probes"):
            continue
        lines += [
            "",
            f"Phase {p['index']} probes ({_what(p)}):",
            "",
            "| probe | allocation | epoch (measured) | epoch (model) | samples/s | epoch cost "
            "| probe time | probe cost |",
            "|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        for i, q in enumerate(p["probes"], 1):
            measured = "-" if q["epoch_s"] is None else format_duration(q["epoch_s"])
            rate = "-" if q["samples_per_s"] is None else f"{q['samples_per_s']:,.0f}"
            cost = "-" if q["epoch_usd"] is None else format_money(q["epoch_usd"])
            failed = f" (failed: {q['failed']})" if q.get("failed") else ""
            lines.append(
                f"| {i} | {_allocation(q['allocation'])}{failed} | {measured} | "
                f"{format_duration(q['predicted_epoch_s'])} | {rate} | {cost} | "
                f"{format_duration(q['probe_s'])} | {format_money(q['probe_usd'])} |"
            )
    return lines


def write_search_plot(state: dict[str, Any], folder: Path) -> list[Path]:
    """'workflow.png': what changed, workers and throughput per epoch over time (SMLT Figs.
    13–14); none without matplotlib or a workflow."""
    flow = state.get("workflow")
    if not flow or not _phases(flow):
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    kind = flow.get("kind")
    label = {"dynamic-batching": "batch size", "nas": "model parameters (MB)"}.get(
        kind, "training samples"
    )
    xs, changed, workers, rates = [], [], [], []
    for p in _phases(flow):
        for h in p.get("epochs_run", []):
            xs.append(h["t_s"])
            if kind == "dynamic-batching":
                changed.append(p["batch_size"])
            elif kind == "nas":
                changed.append(p.get("model_mb", 0.0))
            else:
                changed.append(p["samples"])
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
    for p in _phases(flow):
        for ax in axes:
            ax.axvline(p["t_start_s"], color="grey", linestyle=":", linewidth=0.8)
    axes[-1].set_xlabel("seconds (dotted: a phase starts; its search runs first)")
    axes[0].set_title(f"Workflow ({kind})")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "workflow.png"
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]
