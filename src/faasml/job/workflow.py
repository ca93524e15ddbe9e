"""``workflow:`` of a job file: training whose demands change while it runs (SMLT §3.1, §5.5–5.6),
with a deployment search choosing functions × memory for each phase (docs/search.md).

Exactly one of ``batch_size_schedule`` (dynamic batching: epoch -> batch size), ``nas`` (a
sequence, or a seeded sample of widths × depths, of model configurations, each trained a few
epochs) or ``online`` (data arriving in chunks: shares of the job's data on a schedule, or files
landing in a folder, ``online.watch``); ``search`` sets the searcher and its budget.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faasml._validate import Fields, shown
from faasml.exceptions import ConfigError

WORKFLOWS = ("dynamic-batching", "nas", "online")
NAS_MODELS = {"mlp": ("hidden",), "mobilenet-small": ("width", "blocks")}
"""Built-in models a NAS sampler knows how to widen and deepen, and the options it sets."""


@dataclass(frozen=True)
class SearchOptions:
    """``workflow.search``: the searcher (``faasml.search.SEARCHERS``) and its budget."""

    searcher: str = "gp-ei"
    max_probes: int = 6
    """Probes of the first search."""
    retrigger_probes: int = 3
    """Probes of each search re-triggered by a change (warm from the last posterior)."""
    max_usd: float | None = None
    """Dollars a search may spend; None: no cap but the probe count."""
    ei_threshold: float = 0.01
    probe_rounds: int = 3
    """Training rounds of one probe."""
    retrigger: bool = True
    """False: search once and keep the choice (the static baseline of SMLT Figs. 12–14)."""
    max_functions: int | None = None
    choice: str = "likeliest"
    """GP + EI's rule for its recommendation (``faasml.search.CHOICES``; a warm search's)."""


@dataclass(frozen=True)
class WatchSpec:
    """``workflow.online.watch``: chunks are files landing in a folder; each one that lands is
    trained on (with every sample landed before it) in a phase of its own, in name order."""

    folder: str
    """The folder watched (absolute; a job file's relative path resolves against the file)."""
    files: int
    """Chunk files the run waits for; it ends after training on the last."""
    format: str = "npz"
    """Their format (``faasml.workloads.data.FORMATS``): the job's features and classes."""
    timeout_s: float = 600.0
    """How long the run waits for the next file; then it stops, saying so."""
    poll_s: float = 0.2
    """How often the folder is looked at while waiting (no function is held meanwhile)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "files": self.files,
            "format": self.format,
            "timeout_s": self.timeout_s,
            "poll_s": self.poll_s,
        }


@dataclass(frozen=True)
class WorkflowSpec:
    kind: str
    batch_size_schedule: tuple[tuple[int, int], ...] = ()
    """(first epoch, 0-based; global batch size), epochs strictly increasing."""
    models: tuple[Mapping[str, Any], ...] = ()
    """NAS: model specs ({name, options...}), trained in turn."""
    epochs_per_model: int = 1
    chunks: tuple[float, ...] = ()
    """Online: the share of the training data each chunk brings (summing to 1)."""
    epochs_per_chunk: int = 1
    every_s: float = 0.0
    """Online: seconds between chunk arrivals (no function is held while waiting)."""
    watch: WatchSpec | None = None
    """Online: chunks are files landing in a folder (then ``chunks`` is empty: the job's own
    data is the first phase's)."""
    search: SearchOptions = field(default_factory=SearchOptions)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.kind == "dynamic-batching":
            data["batch_size_schedule"] = {e: b for e, b in self.batch_size_schedule}
        elif self.kind == "nas":
            data["nas"] = {
                "models": [dict(m) for m in self.models],
                "epochs_per_model": self.epochs_per_model,
            }
        elif self.watch is not None:
            data["online"] = {
                "watch": self.watch.to_dict(),
                "epochs_per_chunk": self.epochs_per_chunk,
            }
        else:
            data["online"] = {
                "chunks": list(self.chunks),
                "epochs_per_chunk": self.epochs_per_chunk,
                "every_s": self.every_s,
            }
        s = self.search
        data["search"] = {
            "searcher": s.searcher,
            "max_probes": s.max_probes,
            "retrigger_probes": s.retrigger_probes,
            "ei_threshold": s.ei_threshold,
            "probe_rounds": s.probe_rounds,
            "retrigger": s.retrigger,
            "choice": s.choice,
        }
        if s.max_usd is not None:
            data["search"]["max_usd"] = s.max_usd
        if s.max_functions is not None:
            data["search"]["max_functions"] = s.max_functions
        return data


def parse_workflow(
    value: Any, model_name: str, max_epochs: int, base_dir: Path | None = None
) -> WorkflowSpec:
    """Read ``workflow:``; errors name the field, the value and the rule. A watched folder's
    relative path resolves against ``base_dir`` (the job file's folder; default: here)."""
    f = Fields(value, "workflow", ConfigError)
    present = [k for k in ("batch_size_schedule", "nas", "online") if f.has(k)]
    if len(present) != 1:
        raise ConfigError(
            "workflow needs exactly one of batch_size_schedule (dynamic batching), nas or "
            f"online; it has {', '.join(present) or 'none'}"
        )
    search = _search(f.sub("search", {}))
    which = present[0]
    if which == "batch_size_schedule":
        spec = WorkflowSpec(
            "dynamic-batching",
            batch_size_schedule=_schedule(f.raw(which), max_epochs),
            search=search,
        )
    elif which == "nas":
        nas = f.sub("nas")
        models = _nas_models(nas, model_name)
        spec = WorkflowSpec(
            "nas",
            models=models,
            epochs_per_model=nas.integer("epochs_per_model", 1, minimum=1),
            search=search,
        )
        nas.finish()
    else:
        online = f.sub("online")
        if online.has("watch"):
            both = [k for k in ("chunks", "every_s") if online.has(k)]
            if both:
                raise ConfigError(
                    f"workflow.online has watch and {' and '.join(both)}: its chunks come from "
                    "one of them (files landing in the watched folder, or shares of the job's "
                    "data on a schedule)"
                )
            spec = WorkflowSpec(
                "online",
                epochs_per_chunk=online.integer("epochs_per_chunk", 1, minimum=1),
                watch=_watch(online.sub("watch"), base_dir or Path.cwd()),
                search=search,
            )
        else:
            spec = WorkflowSpec(
                "online",
                chunks=_chunks(online),
                epochs_per_chunk=online.integer("epochs_per_chunk", 1, minimum=1),
                every_s=online.number("every_s", 0.0, minimum=0.0),
                search=search,
            )
        online.finish()
    f.finish()
    return spec


def _schedule(value: Any, max_epochs: int) -> tuple[tuple[int, int], ...]:
    where = "workflow.batch_size_schedule"
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(
            f"the value of {where} is {shown(value)}, but must be a mapping of epoch -> batch "
            "size such as {0: 64, 5: 256}"
        )
    steps: list[tuple[int, int]] = []
    for epoch, size in value.items():
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(
                f"{where} has epoch {shown(epoch)}, but epochs must be whole numbers >= 0"
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(
                f"the value of {where}.{epoch} is {shown(size)}, but must be a batch size >= 1"
            )
        if steps and epoch <= steps[-1][0]:
            raise ConfigError(
                f"{where} has epoch {epoch} after epoch {steps[-1][0]}, but its epochs must "
                "increase"
            )
        if epoch >= max_epochs:
            raise ConfigError(
                f"{where} has epoch {epoch}, but must start its steps before "
                f"training.max_epochs ({max_epochs})"
            )
        steps.append((epoch, size))
    return tuple(steps)


def _nas_models(nas: Fields, model_name: str) -> tuple[Mapping[str, Any], ...]:
    if nas.has("models"):
        out = []
        for index, entry in enumerate(nas.items("models")):
            if not isinstance(entry, Mapping):
                raise nas.fail(f"models[{index}]", entry, "must be a mapping of model options")
            out.append({"name": entry.get("name", model_name), **dict(entry)})
        for key in ("widths", "depths", "count", "seed"):
            if nas.has(key):
                raise ConfigError(
                    f"workflow.nas has both models and {key}: give a sequence of models or a "
                    "sampler (widths, depths, count), not both"
                )
        return tuple(out)
    if model_name not in NAS_MODELS:
        raise ConfigError(
            f"workflow.nas samples widths and depths of {', '.join(NAS_MODELS)}, but the job's "
            f"model is {shown(model_name)}; list its configurations under workflow.nas.models"
        )
    widths = [_positive(nas, "widths", i, v) for i, v in enumerate(nas.items("widths"))]
    depths = [_positive(nas, "depths", i, v) for i, v in enumerate(nas.items("depths"))]
    pairs = list(itertools.product(widths, depths))
    count = nas.integer("count", min(4, len(pairs)), minimum=1)
    if count > len(pairs):
        raise nas.fail(
            "count", count, f"must be <= {len(pairs)} (the widths × depths combinations)"
        )
    seed = nas.integer("seed", 0, minimum=0)
    chosen = np.random.default_rng(seed).choice(len(pairs), size=count, replace=False)
    models: list[Mapping[str, Any]] = []
    for index in chosen:
        width, depth = pairs[int(index)]
        if model_name == "mlp":
            models.append({"name": "mlp", "hidden": [width] * depth})
        else:
            models.append({"name": model_name, "width": width, "blocks": depth})
    return tuple(models)


def _positive(f: Fields, name: str, index: int, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise f.fail(f"{name}[{index}]", value, "must be a whole number >= 1")
    return value


def _chunks(f: Fields) -> tuple[float, ...]:
    value = f.raw("chunks")
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise f.fail("chunks", value, "must be >= 1 (or a list of shares)")
        return tuple([1.0 / value] * value)
    shares = f.items("chunks")
    for index, share in enumerate(shares):
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise f.fail(f"chunks[{index}]", share, "must be a share of the data in (0, 1]")
    if abs(sum(shares) - 1.0) > 1e-6:
        raise f.fail("chunks", shares, f"must sum to 1 (they sum to {sum(shares):g})")
    return tuple(float(s) for s in shares)


def _watch(f: Fields, base_dir: Path) -> WatchSpec:
    from faasml.workloads.data import FORMATS

    folder = base_dir / Path(f.text("folder")).expanduser()
    if not folder.is_dir():
        raise f.fail("folder", f.data["folder"], f"must name an existing folder ({folder})")
    watch = WatchSpec(
        folder=str(folder.resolve()),
        files=f.integer("files", minimum=1, maximum=10_000),
        format=f.choice("format", FORMATS, "npz"),
        timeout_s=f.number("timeout_s", 600.0, minimum=0.0, strict_minimum=True),
        poll_s=f.number("poll_s", 0.2, minimum=0.0, strict_minimum=True),
    )
    f.finish()
    return watch


def _search(f: Fields) -> SearchOptions:
    from faasml.search import CHOICES, SEARCHERS

    searcher = f.text("searcher", "gp-ei")
    if searcher not in SEARCHERS:
        raise f.fail("searcher", searcher, f"must be one of: {', '.join(SEARCHERS.names())}")
    max_usd = f.optional_number("max_usd", minimum=0.0, strict_minimum=True)
    options = SearchOptions(
        searcher=searcher,
        max_probes=f.integer("max_probes", 6, minimum=1, maximum=100),
        retrigger_probes=f.integer("retrigger_probes", 3, minimum=1, maximum=100),
        max_usd=max_usd,
        ei_threshold=f.number("ei_threshold", 0.01, minimum=0.0),
        probe_rounds=f.integer("probe_rounds", 3, minimum=1),
        retrigger=f.boolean("retrigger", True),
        max_functions=f.integer("max_functions", minimum=1) if f.has("max_functions") else None,
        choice=f.choice("choice", CHOICES, "likeliest"),
    )
    f.finish()
    return options


def check_workflow(spec: WorkflowSpec, training_samples: int | None) -> None:
    """The rules that need the data's size: no batch larger than the training data, no chunk
    smaller than one batch."""
    if training_samples is None:
        return
    for epoch, size in spec.batch_size_schedule:
        if size > training_samples:
            raise ConfigError(
                f"the value of workflow.batch_size_schedule.{epoch} is {size}, but must be <= "
                f"the {training_samples:,} training samples"
            )
    for index, share in enumerate(spec.chunks):
        if round(share * training_samples) < 1:
            raise ConfigError(
                f"the value of workflow.online.chunks[{index}] is {share:g}, but a chunk must "
                f"hold at least one of the {training_samples:,} training samples"
            )
