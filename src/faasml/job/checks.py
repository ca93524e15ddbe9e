"""The checks of a job that reach into other layers: its data, model, catalog, platform, profile.

``check_job`` is the one validation ``load_job`` and ``faasml.job.from_mapping`` run, once, so
``faasml job check``, ``faasml tune``, ``faasml train`` and the Python API refuse the same jobs
with the same message. None of them runs the job's own code (a ``module:factory`` model).
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faasml._validate import shown
from faasml.exceptions import ConfigError
from faasml.job.parse import is_reference
from faasml.job.spec import JobSpec
from faasml.job.trials import apply_config, check_batch_size, check_trial
from faasml.job.workflow import check_workflow
from faasml.searchspace import SearchSpace
from faasml.workloads.data import Dataset


def check_job(job: JobSpec) -> None:
    """Every rule a job must keep before anything runs; raises a one-line ``ConfigError``."""
    check_trial(job)
    _check_tuning(job)
    _check_tuning_workflow(job)
    _check_platform(job)
    _check_catalog(job)
    _check_profile(job)
    if job.search_space is not None:
        _check_search_space(job, job.search_space)


def check_data(job: JobSpec, train: Dataset) -> None:
    """The rules that need the data read (a file's sample count): batch size <= samples."""
    check_batch_size(job.batch_size, len(train), job.dataset)
    if job.workflow is not None:
        check_workflow(job.workflow, len(train))


def _check_tuning(job: JobSpec) -> None:
    tuning = job.tuning
    if tuning is None:
        return
    most = max(2, tuning.trials)
    if tuning.reduction_factor > most:
        raise ConfigError(
            f"the value of tuning.reduction_factor is {tuning.reduction_factor}, but must be "
            f"<= {most} (tuning.trials, at least 2): a larger η keeps no trial to compare "
            "after the first stage"
        )


def _check_tuning_workflow(job: JobSpec) -> None:
    """A tuning job's stages are planned by the model (``tuning:``); a ``workflow:`` (phases
    deployed by a search) is a training job's. Refused, not silently ignored."""
    if job.tuning is not None and job.workflow is not None:
        raise ConfigError(
            f"the job has both tuning: and workflow: ({job.workflow.kind}), but a workflow "
            "runs under faasml train only: a tuning job's stages are planned by the model; "
            "remove workflow: to tune, or tuning: to train with the workflow"
        )
    if job.tuning is not None and job.planner == "search":
        raise ConfigError(
            "the value of planner is 'search', but a tuning job's stages are planned by the "
            "model: planner: search is for faasml train (remove it, or tuning:)"
        )


PLATFORM_NAMES = ("lithops", "local", "ray")
"""The platforms a job may name: those ``faasml.runtime.platforms.contract.PLATFORMS``
implements (a job is read below the runtime's layer, so it knows them by name;
tests/test_layers.py checks that the two agree)."""


def _check_platform(job: JobSpec) -> None:
    if job.platform not in PLATFORM_NAMES:
        raise ConfigError(
            f"the value of platform is {shown(job.platform)}, but must be one of: "
            f"{', '.join(PLATFORM_NAMES)}"
        )


def _check_catalog(job: JobSpec) -> None:
    """The catalog loads, and prices every store the job may synchronise through."""
    from faasml.catalog import load_catalog

    try:
        catalog = load_catalog(job.catalog)
    except ConfigError as err:
        raise ConfigError(f"the value of catalog is {shown(job.catalog)}, but {err}") from None
    missing = [name for name in job.sync_stores() if name not in catalog.storages]
    if missing:
        raise ConfigError(
            f"the job synchronises through {', '.join(missing)}, but catalog {catalog.name} "
            f"prices no storage of that name; it offers {', '.join(sorted(catalog.storages))} "
            "(name the job's stores after them, or point catalog: at one that prices yours)"
        )


def _check_profile(job: JobSpec) -> None:
    if job.profile is None:
        return
    from faasml.workload import load_workload

    try:
        load_workload(job.profile)
    except ConfigError as err:
        raise ConfigError(f"the value of profile is {shown(job.profile)}, but {err}") from None


def _check_search_space(job: JobSpec, space: SearchSpace) -> None:
    """Every bound or choice of every hyperparameter must make a valid job (a conditional one
    with the values its condition needs, e.g. momentum with optimizer.name sgd)."""
    for key, distribution in space.params.items():
        needs = dict(space.conditions.get(key, {}))
        for value in distribution.extremes():
            try:
                apply_config(job, {**needs, key: value})
            except ConfigError as err:
                raise ConfigError(
                    f"search_space.{key} allows {shown(value)}, which makes an invalid job: {err}"
                ) from None


MODEL_KINDS = ("built-in", "loop", "factory", "unknown")
"""What a job's ``model:`` names: a built-in model, a training loop ``train_loop(config,
ctx)``, a model factory ``factory(**options)``, or code whose kind only a run can tell."""
_SELF_CHECKED = ("faasml.workloads.function_model:", "faasml.loop.model:")
"""faasml's own factories of a training function and a loop (a run's, not a job file's)."""


@dataclass(frozen=True)
class ModelKind:
    """Which kind of model a job names, read from its source without running it."""

    kind: str
    """One of MODEL_KINDS."""
    signature: str = ""
    """The function's parameters as written, e.g. ``(config, ctx)``."""


def model_kind(name: str, options: Mapping[str, Any]) -> ModelKind:
    """Which kind ``name`` is, from the parameters of its top-level ``def`` in the module's
    source (no code runs): two required positional parameters the options do not name make a
    training loop, parameters all among the options a factory. "unknown" where the source
    holds no such ``def`` (a class, an assignment, compiled code). A function that is neither,
    or that takes ``(config, ctx)`` and returns a value (``faasml.Tuner``'s training function
    returning ``TorchTrainable``), is refused in one line naming it."""
    if not is_reference(name) or name.startswith(_SELF_CHECKED):
        return ModelKind("built-in")
    module, _, attribute = name.partition(":")
    node = _top_level_def(module, attribute)
    if node is None:
        return ModelKind("unknown")
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    required = [a.arg for a in positional[: len(positional) - len(args.defaults)]]
    keywords = [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
    signature = "(" + ", ".join(a.arg for a in positional) + ")"
    loop_shaped = len(required) == 2 and not keywords and not set(required) & set(options)
    if loop_shaped and not _returns_value(node):
        return ModelKind("loop", signature)
    if not loop_shaped and all(p in options for p in [*required, *keywords]):
        return ModelKind("factory", signature)
    named = f"the job's model {name!r} is {attribute}{signature}"
    if loop_shaped:
        raise ConfigError(
            f"{named}, which returns a value: a job file's training loop train_loop(config, "
            "ctx) returns None (its results go through ctx.report); a training function "
            "returning faasml.TorchTrainable is for faasml.Tuner"
        )
    missing = ", ".join(p for p in [*required, *keywords] if p not in options)
    raise ConfigError(
        f"{named}: neither a training loop train_loop(config, ctx) nor a model factory called "
        f"as factory(**options) (the model's options do not give {missing}); a training "
        "function train_fn(config) returning faasml.TorchTrainable is for faasml.Tuner"
    )


def _top_level_def(module: str, attribute: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The last top-level ``def attribute`` in ``module``'s source, found without importing
    it (or its packages); None where there is none or no source."""
    path = _module_source(module)
    if path is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == attribute:
            found = node
        elif isinstance(node, ast.ClassDef | ast.Assign | ast.Import | ast.ImportFrom):
            names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            names += [getattr(node, "name", "")]
            names += [(a.asname or a.name) for a in getattr(node, "names", [])]
            if attribute in names:
                found = None  # rebound after (or instead of) a def: only a run can tell
    return found


def _module_source(dotted: str) -> str | None:
    """The ``.py`` file of ``dotted``, each part looked up in the folders of the one before
    (no package's code runs)."""
    parts = dotted.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for depth in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return None
            name = ".".join(parts[: depth + 1])
            spec = importlib.machinery.PathFinder.find_spec(name, spec.submodule_search_locations)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return origin if origin and origin.endswith(".py") else None


def _returns_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``function``'s own body (not a nested def's) returns something besides None."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        value = node.value if isinstance(node, ast.Return) else None
        if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False
