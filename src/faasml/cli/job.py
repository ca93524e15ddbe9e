"""`faasml job check JOB`: validate a job file, load its data, build its model, show its trials."""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape
from rich.table import Table

from faasml.cli._common import add_set_option, console, print_json
from faasml.job import JobSpec, check_data, parse_assignments
from faasml.job.checks import model_kind
from faasml.job.parse import is_reference
from faasml.runtime.runs.loop_job import read_job
from faasml.workloads.build import build_model, build_optimizer, load_data


def register(commands: Any) -> None:
    job = commands.add_parser("job", help="check job files")
    kinds = job.add_subparsers(dest="job_kind", metavar="KIND", parser_class=type(job))
    kinds.required = True
    check = kinds.add_parser(
        "check",
        help="validate a job file, load its data and build its model",
        description="Read JOB with the environment (FAASML_*) and --set overrides, validate "
        "every field, load the data, build the model and optimiser, and show the sizes the "
        "planner uses and the first sampled trial configurations. Nothing is trained, and a "
        "module:attr model (your code) is not imported: its source says whether it is a "
        "training loop train_loop(config, ctx) or a model factory factory(**options).",
    )
    check.add_argument("job", help="path of the job file (see docs/jobs.md)")
    add_set_option(check)
    check.add_argument(
        "--trials", type=int, default=5, metavar="N", help="sampled configurations to show"
    )
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(func=run_job_check)


def summarize(job: JobSpec, trials: int) -> dict[str, Any]:
    """The validated job, its data and model sizes, its model's kind (``model_kind``) and its
    first ``trials`` configurations."""
    kind = model_kind(job.model.name, job.model.options).kind
    configs = []
    if job.search_space is not None:
        count = min(trials, job.tuning.trials) if job.tuning is not None else trials
        configs = job.sample_configs(max(count, 0))
    if kind == "loop":  # its own data and optimiser, not the stand-ins a run plans with
        written = {k: v for k, v in job.to_dict().items() if k not in ("dataset", "optimizer")}
        shown = {"name": job.model.name, "kind": kind, "params": None, "model_mb": None}
        return {"job": written, "data": None, "model": shown, "trials": configs}
    train, test = load_data(job.dataset)
    check_data(job, train)
    params: int | None = None
    model_mb: float | None = None
    if not is_reference(job.model.name):  # a user's factory is their code: run only by a run
        model = build_model(job.model, train.input_shape, train.num_classes)
        build_optimizer(job.optimizer, model.num_params)
        params, model_mb = model.num_params, model.size_mb
    return {
        "job": job.to_dict(),
        "data": {
            "train_samples": len(train),
            "test_samples": len(test),
            "input_shape": list(train.input_shape),
            "num_classes": train.num_classes,
            "dataset_mb": round(train.size_mb, 6),
        },
        "model": {"name": job.model.name, "kind": kind, "params": params, "model_mb": model_mb},
        "trials": configs,
    }


_BUILT = {
    "loop": "your training loop train_loop(config, ctx): it brings its data (ctx.shard) and "
    "optimiser (ctx.prepare); imported and measured when the job runs, not by job check",
    "factory": "your model factory factory(**options): imported and built when the job runs, "
    "not by job check",
    "unknown": "your code: imported when the job runs (a training loop or a model factory), "
    "not by job check",
}


def _model_rows(table: Table, job: JobSpec, summary: dict[str, Any]) -> None:
    """The model's row (which kind it is), and the data's and optimiser's but for a loop's."""
    data, model = summary["data"], summary["model"]
    built = _BUILT.get(model["kind"])
    if built is None:
        built = f"{model['params']:,} parameters ({model['model_mb']:.3g} MB)"
    table.add_row("model", escape(f"{model['name']}: {built}"))
    if data is None:
        return
    table.add_row(
        "data",
        f"{data['train_samples']:,} training ({data['dataset_mb']:.2f} MB) + "
        f"{data['test_samples']:,} held-out samples of shape {tuple(data['input_shape'])}, "
        f"{data['num_classes']} classes",
    )
    table.add_row(
        "optimizer", escape(f"{job.optimizer.name} {dict(job.optimizer.hyperparameters)}")
    )


def run_job_check(args: argparse.Namespace) -> int:
    job = read_job(args.job, parse_assignments(args.set), run_code=False)
    summary = summarize(job, args.trials)
    if args.json:
        print_json(summary)
        return 0
    out = console()
    out.print(f"[bold]{escape(job.name)}[/] is valid ({escape(args.job)})")
    table = Table(show_header=False, box=None)
    _model_rows(table, job, summary)
    table.add_row("batch size", f"{job.batch_size} (global, split over the functions)")
    if job.tuning is not None:
        t = job.tuning
        mode = "" if (t.metric, t.mode) == ("loss", "min") else f" ({t.mode})"
        table.add_row(
            "tuning",
            f"{t.trials} trials, η = {t.reduction_factor}, {t.stages} stages "
            f"{list(t.trials_per_stage)}, "
            + (
                f"Hyperband brackets for {t.hyperband} epoch(s)"
                if t.hyperband is not None
                else f"{t.epochs_per_stage} epoch(s) per stage"
            )
            + f", by {t.metric}{mode}"
            + ("" if t.sampler == "random" else f", drawn by {t.sampler}"),
        )
    target = job.training.target_loss
    table.add_row(
        "training",
        f"up to {job.training.max_epochs} epochs"
        + (f", until loss <= {target:g}" if target is not None else ""),
    )
    where = f"platform {job.platform}, store {job.to_dict()['store']}, catalog {job.catalog}"
    table.add_row("runs on", escape(where))
    if job.stores:
        names = ", ".join(job.sync_stores())
        table.add_row("stores", escape(f"the planner chooses among: {names}"))
    out.print(table)
    for index, config in enumerate(summary["trials"]):
        values = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in config.items()
        )
        out.print(f"  trial {index}: {escape(values)}")
    return 0
