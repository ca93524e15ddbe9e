"""What a coordinator sends a worker function and what it gets back: the model's recipe, one
worker's task for a segment, and its report (``runtime.worker`` runs the task)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from faasml.loop import LOOP_FACTORY
from faasml.loop.shipping import by_reference
from faasml.runtime.function.faults import Fault
from faasml.sync.stores import Store
from faasml.workloads.function_model import FACTORY


@dataclass(frozen=True)
class ModelRecipe:
    """How a worker rebuilds the model and optimiser (the job's model and optimizer)."""

    model: str
    model_options: dict[str, Any]
    input_shape: tuple[int, ...]
    num_classes: int
    optimizer: str
    hyperparameters: dict[str, Any]
    batch_size: int
    seed: int


def sent_recipe(recipe: ModelRecipe, objects: Store, shipped: set[str]) -> ModelRecipe:
    """``recipe`` as a function is sent it: a packed training function in its options put in
    ``objects`` (once per digest: ``shipped`` holds those put) and named by reference
    (``loop.shipping``), so a request carries no pickle (FaaS requests are capped in size)."""
    if recipe.model not in (FACTORY, LOOP_FACTORY) or "function" not in recipe.model_options:
        return recipe
    return replace(recipe, model_options=by_reference(recipe.model_options, objects, shipped))


@dataclass(frozen=True)
class WorkerTask:
    """One worker's part of a segment: rounds [start, stop) of one epoch."""

    recipe: ModelRecipe
    object_url: str
    """Object store: data partitions and checkpoints."""
    sync_url: str
    """Parameter store: gradients."""
    scheme: str
    namespace: str
    """Key prefix of the trial (checkpoints, heartbeats, sync rounds)."""
    data_prefix: str
    """Partitions are under ``{data_prefix}/n{n}/part-{worker}``, the test set ``/test``."""
    n: int
    worker_id: int
    epoch: int
    start_batch: int
    stop_batch: int | None
    """None: to the end of the epoch."""
    round_id: int
    """Id of the first round of this segment."""
    checkpoint: str | None
    """Key of the checkpoint to start from; None starts from ``init_params(seed)``."""
    checkpoint_out: str
    """Key worker 0 writes the segment's final checkpoint to."""
    sync_timeout_s: float = 60.0
    start_timeout_s: float = 60.0
    """How long a worker that has loaded waits for the others to start (their first
    heartbeat) before its first round: a peer still cold-starting is late, not lost."""
    fault: Fault | None = None
    evaluate: bool = True
    threads: int = 0
    """torch threads (0: leave as the platform set them)."""
    epochs: int = 1
    """Whole epochs this invocation trains, from ``epoch`` (more than one only from an
    epoch's start to its end: ``start_batch`` 0, ``stop_batch`` None); worker 0 evaluates
    after each, and one checkpoint is written at the end."""
    stop_diverged: bool = False
    """End a segment of several epochs after the first whose parameters are NaN or infinite
    (every worker holds the same parameters, so all stop at the same epoch)."""


@dataclass
class SegmentReport:
    """What a worker reports back (SMLT: loss, throughput, batch size)."""

    worker_id: int
    epoch: int
    rounds: int
    samples: int
    loss_sum: float | None
    """Sum of minibatch losses × minibatch sizes (the coordinator averages over workers);
    None where it is not known (a training loop that reports no ``loss``)."""
    load_s: float
    compute_s: float
    sync_s: float
    elapsed_s: float
    epoch_done: bool
    batch_size: int
    object_stats: dict[str, int] = field(default_factory=dict)
    sync_stats: dict[str, int] = field(default_factory=dict)
    val: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None
    pid: int = 0
    cold_load: bool = False
    reported: dict[str, float] = field(default_factory=dict)
    """Metrics the model's code recorded with ``faasml.report``."""
    epochs: list[dict[str, Any]] = field(default_factory=list)
    """Per epoch of a segment of several (``WorkerTask.epochs`` > 1): its loss_sum, samples,
    compute_s, sync_s, elapsed_s (this worker's, from the epoch's first round to its
    evaluation's end), val and reported; empty for a segment within one epoch."""

    @property
    def samples_per_s(self) -> float:
        busy = self.compute_s + self.sync_s
        return self.samples / busy if busy > 0 else 0.0
