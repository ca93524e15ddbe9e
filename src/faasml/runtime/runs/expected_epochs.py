"""The epochs a training run with a target loss plans and prices: the offline estimate
(``models.offline``, LambdaML-style) from a sample run of the job's configuration on the run's
platform (``function.sample_run``, billed as profiling), at most ``max_epochs``, the cap; the
cap itself where there is no target or the sample run gives no estimate (the line says why)."""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.job import JobSpec
from faasml.models.offline import offline_estimate
from faasml.runtime.coordinator.meter import Meter
from faasml.runtime.function.sample_run import SAMPLE_FN
from faasml.runtime.platforms.contract import FunctionError, Platform
from faasml.runtime.profile.calls import ProbeCalls, job_recipes

SAMPLE_FRACTION = 0.1
"""Share of the training set the sample run trains on (at least ``LEAST_ROUNDS`` batches)."""
SAMPLE_EPOCHS = 6
"""Epochs of the sample run: enough points to fit a loss curve's three parameters and judge it."""
LEAST_ROUNDS = 4
"""Global batches a sample holds at least, so that an epoch of it is more than one step."""


@dataclass(frozen=True)
class ExpectedEpochs:
    """The epochs to plan for, what the run records of how they were found, and the sample
    run's seconds (measuring, as profiling is: of a deadline)."""

    epochs: int
    line: str
    seconds: float = 0.0
    usd: float = 0.0


def from_curve(
    losses: Sequence[float | None], target: float, fraction: float, cap: int
) -> ExpectedEpochs:
    """The offline estimate of a sample run's losses (epoch 1, 2, …; None where unknown) for
    ``target``, at most ``cap``; ``cap`` where the curve gives none."""
    points = [(e, float(v)) for e, v in enumerate(losses, 1) if v is not None and math.isfinite(v)]
    reached = next((e for e, v in points if v <= target), None)
    if reached is not None:  # the sample reached it: an epoch of the sample stands for one
        return ExpectedEpochs(
            min(reached, cap),
            f"the sample run reached the target loss {target:g} at epoch {reached}: planned "
            f"for {min(reached, cap)} epoch(s) (max_epochs {cap} is the cap)",
        )
    try:
        estimate = offline_estimate(
            [e for e, _ in points], [v for _, v in points], target, sample_fraction=fraction
        )
    except (UnreachableTargetError, ConfigError) as err:
        return ExpectedEpochs(
            cap, f"no offline estimate of the epochs to loss {target:g} ({err}): planned for "
            f"max_epochs {cap}",
        )  # fmt: skip
    epochs = min(estimate.epochs, cap)
    return ExpectedEpochs(
        epochs,
        f"offline estimate: {estimate.epochs} epoch(s) to loss {target:g} (a sample run of "
        f"{len(losses)} epochs on {fraction:.0%} of the data); planned for {epochs} "
        f"(max_epochs {cap} is the cap)",
    )


def expected_epochs(
    job: JobSpec,
    catalog: Catalog,
    platform: Platform,
    memory_mb: int,
    data: tuple[Any, Any],
    meter: Meter | None = None,
) -> ExpectedEpochs:
    """The epochs a training run of ``job`` plans for: from a sample run in one function of
    ``memory_mb`` (one the probe left warm, where it can) when the job has a target loss."""
    training = job.training
    cap, target = int(training.max_epochs), training.target_loss
    if target is None:
        return ExpectedEpochs(cap, "")
    began = time.monotonic()
    train, _ = data
    least = min(len(train), LEAST_ROUNDS * max(job.batch_size, 1))
    with tempfile.TemporaryDirectory(prefix="faasml-sample-") as folder:
        recipes = job_recipes(job, [{}], train)
        calls = ProbeCalls(
            job, catalog, platform, folder, recipes, data, measure_s=0.0, meter=meter
        )
        calls.what = "sample run (offline estimate of the epochs)"
        sample = {
            "fraction": SAMPLE_FRACTION,
            "least_rows": least,
            "epochs": SAMPLE_EPOCHS,
            "max_epochs": cap,
        }
        try:
            result = calls.call(memory_mb, [{**calls.payload, "sample": sample}], SAMPLE_FN)[0]
        except FunctionError as err:
            seconds = time.monotonic() - began
            line = f"the sample run failed ({err.kind}): planned for max_epochs {cap}"
            return ExpectedEpochs(cap, line, seconds, calls.spent)
        finally:
            calls.close()
    found = from_curve(result["losses"], target, float(result["fraction"]), cap)
    return ExpectedEpochs(found.epochs, found.line, time.monotonic() - began, calls.spent)
