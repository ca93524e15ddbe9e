"""Checks of the Python API's arguments (``faasml.Tuner``, ``faasml.Trainer``): each value of
the wrong kind is refused in one line naming it and the rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from faasml._validate import shown
from faasml.exceptions import ConfigError
from faasml.job.layers import hyperband_overrides
from faasml.runtime.runs.events import RunCallback

if TYPE_CHECKING:
    from faasml.api import TuneConfig


def check_type(name: str, value: object, types: tuple[type, ...], what: str) -> None:
    """ConfigError naming ``name`` unless ``value`` is None or one of ``types`` (never a bool)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
        raise ConfigError(
            f"the value of {name} is {shown(value)} ({type(value).__name__}), but must be {what}"
        )


def checked_callbacks(callbacks: object) -> tuple[RunCallback, ...]:
    """``callbacks`` as a tuple, each a ``RunCallback``; else ConfigError naming the value."""
    if not isinstance(callbacks, Sequence) or isinstance(callbacks, str):
        raise ConfigError(
            f"the value of callbacks is {shown(callbacks)}, but must be a list of "
            "faasml.RunCallback objects"
        )
    for callback in callbacks:
        if not isinstance(callback, RunCallback):
            raise ConfigError(
                f"callbacks holds {shown(callback)} ({type(callback).__name__}), but each must "
                "be a faasml.RunCallback (subclass it and override on_trial_result, ...)"
            )
    return tuple(callbacks)


def with_lines(callbacks: Sequence[RunCallback], verbose: int) -> list[RunCallback]:
    """``callbacks``, and with ``verbose`` 1 a printer of a line per trial result."""
    if verbose not in (0, 1) or isinstance(verbose, bool):
        raise ConfigError(f"the value of verbose is {shown(verbose)}, but must be 0 or 1")
    if not verbose:
        return list(callbacks)
    from faasml.reports.trial_lines import TrialLines

    return [*callbacks, TrialLines(lambda line: print(line, flush=True), stages=True)]


def search_alg(value: Any) -> Any:
    """An Optuna sampler object given as ``search_alg`` (checked); None for a name (the job's
    ``tuning.sampler``, checked with the job) or None."""
    from faasml.samplers import ConfigSampler, check_sampler
    from faasml.searchspace import SearchSpace

    if isinstance(value, str):
        check_sampler(value, where="search_alg")
    if value is None or isinstance(value, str):
        return None

    ConfigSampler(SearchSpace({}), value)  # one line naming the value when it is no sampler
    return value


def tuning_overrides(config: TuneConfig, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The job's ``tuning`` fields ``config`` sets (dotted paths), Hyperband's brackets in place
    of successive halving with ``hyperband``; ``settings``: the Tuner's other fields."""
    tuning = {
        key: value
        for key, value in (
            ("tuning.trials", config.num_samples),
            ("tuning.reduction_factor", config.reduction_factor),
            ("tuning.epochs_per_stage", config.epochs_per_stage),
            ("tuning.stages", config.stages),
            ("tuning.metric", config.metric),
            ("tuning.mode", config.mode),
            ("tuning.sampler", config.search_alg if isinstance(config.search_alg, str) else None),
        )
        if value is not None
    }
    if config.hyperband is None:
        return tuning
    given = [
        name for name in ("num_samples", "stages", "epochs_per_stage") if getattr(config, name)
    ]
    given += [
        key
        for key in settings
        if key in ("tuning.trials", "tuning.stages", "tuning.epochs_per_stage", "tuning.hyperband")
    ]
    if given:
        raise ConfigError(
            f"hyperband={config.hyperband} sets the brackets' trials, stages and epochs; leave "
            f"out {', '.join(given)}"
        )
    return {**tuning, **hyperband_overrides(config.hyperband, {})}
