"""``Tuner.restore``: the tuner of a run directory, whose ``fit`` continues the run the way
``faasml resume`` does (``runtime.session.resume_run``: the job the record holds, its job file
unchanged, code it names signed by this user) or, the run finished, returns its results."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faasml.exceptions import ConfigError
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.record.records import RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.runs.events import RunCallback

if TYPE_CHECKING:
    from faasml.api import Tuner

FINISHED = ("finished", "target-missed")
"""What ``faasml resume`` refuses to continue: a restore returns such a run's results."""


def restored_tuner(
    cls: type[Tuner],
    run_dir: str | os.PathLike[str],
    trainable: Callable[..., Any] | None,
    callbacks: Sequence[RunCallback],
) -> Tuner:
    """A ``cls`` bound to the run in ``run_dir`` (read and checked now: a folder holding no
    tuning run, or code the user did not sign, is refused before ``fit``)."""
    from faasml.runtime.runs.job_guard import recorded_job

    folder = RunDir(run_dir)
    record = folder.read_record()
    if record.kind != "tune":
        raise ConfigError(
            f"the run in {run_dir} is a {record.kind or 'untyped'} run, but Tuner.restore "
            f"continues tuning runs; continue it with faasml resume {run_dir}"
        )
    saved = record_to_json(record)
    job = recorded_job(saved, folder.path, ignore_job_file=True)  # the file: checked by fit
    model = saved["job"].get("model") or {}
    if trainable is not None:
        _check_trainable(trainable, model, run_dir)
    tuner = cls.__new__(cls)
    tuner.job = job
    tuner.run_dir = Path(run_dir)
    tuner.constraint = record.constraint
    tuner.callbacks = tuple(callbacks)
    tuner._restored = True
    tuner._checked = True
    tuner._default_dir = None
    tuner._search_alg = None  # the job's tuning.sampler: a resume draws with it
    tuner._keys, tuner._constants = _function_names(saved["job"])
    return tuner


def continue_run(run_dir: Path, callbacks: Sequence[RunCallback]) -> RunRecord:
    """The run continued to its end, as ``faasml resume`` does; a finished run's record as is."""
    from faasml.reports.run_outputs import write_outputs
    from faasml.runtime.record.run_lock import lock_run
    from faasml.runtime.runs.session import resume_run

    record = RunDir(run_dir).read_record()
    if record.status in FINISHED:
        return record
    with lock_run(run_dir):
        run = resume_run(run_dir, outputs=write_outputs, callbacks=callbacks)
        return run.execute()


def _function_names(job: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """A training function's job: its searched keys as the caller wrote them
    (``model.config.lr`` -> ``lr``) and its constants; none for a job file's."""
    from faasml.loop import LOOP_FACTORY
    from faasml.workloads.function_model import FACTORY

    model = job.get("model") or {}
    if model.get("name") not in (FACTORY, LOOP_FACTORY):
        return {}, {}
    keys = {key: key.removeprefix("model.config.") for key in (job.get("search_space") or {})}
    searched = set(keys.values())
    constants = {k: v for k, v in (model.get("config") or {}).items() if k not in searched}
    return keys, constants


def _check_trainable(
    trainable: Callable[..., Any], model: dict[str, Any], run_dir: str | os.PathLike[str]
) -> None:
    """``trainable`` is the training function the run recorded: the same name, code and
    model it builds (``function_structure``, the digest the run recorded)."""
    from faasml.loop import LOOP_FACTORY
    from faasml.loop.model import LoopShape, inspect_train_fn
    from faasml.workloads import function_model as fm

    if model.get("name") not in (fm.FACTORY, LOOP_FACTORY):
        raise ConfigError(
            f"trainable is given, but the run in {run_dir} tunes a job file's model, not a "
            "training function; restore it without trainable"
        )
    config, seed = model.get("config") or {}, int(model.get("seed") or 0)
    if model.get("name") == LOOP_FACTORY:  # a loop: its shape, as the Tuner saw it
        found = inspect_train_fn(trainable, config, seed, 64, bool(model.get("batch_in_config")))
        structure = found.structure if isinstance(found, LoopShape) else None
    else:
        built = fm.call_train_fn(trainable, config, seed)
        structure = fm.function_structure(trainable, built)
    if structure != model.get("structure"):
        raise ConfigError(
            f"trainable is not the training function the run in {run_dir} recorded (its code "
            "or the model it builds differs); restore without trainable to continue with the "
            "recorded one, or start a new run with faasml.Tuner"
        )
