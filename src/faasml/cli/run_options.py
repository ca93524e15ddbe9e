"""``--json`` of `faasml tune`, `train` and `resume` (the record alone on stdout), the line
per trial result that piped output prints (``reports.trial_lines``), and the job a run reads
(``--set``, and ``--hyperband`` on `faasml tune`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.markup import escape

from faasml.cli._common import print_json
from faasml.job import JobSpec, parse_assignments
from faasml.job.layers import hyperband_overrides
from faasml.reports.trial_lines import TrialLines
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.record.run_lock import last_run_dir
from faasml.runtime.runs.base import BaseRun
from faasml.runtime.runs.loop_job import read_job

DEFAULT_R = 0
"""``--hyperband`` given alone: the job's own largest budget (``TuningSpec.default_hyperband``)."""


def _max_epochs(text: str) -> int:
    """``--hyperband``'s value: an integer R >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(
            f"the value of --hyperband is {text!r}, but must be an integer R >= 1 (the largest "
            "number of epochs a trial trains); alone, put it after the job file"
        )
    return int(text)


def add_hyperband_option(parser: argparse.ArgumentParser) -> None:
    """``--hyperband [R]``: the job's ``tuning.hyperband: R``."""
    parser.add_argument(
        "--hyperband",
        nargs="?",
        const=DEFAULT_R,
        type=_max_epochs,
        metavar="R",
        help="tune with Hyperband's brackets for a largest budget of R epochs in place of the "
        "job's successive halving (the job file's tuning.hyperband: R); alone, R is the epochs "
        "the job's last stage trains its trials to (stages x epochs_per_stage)",
    )


def read_run_job(args: argparse.Namespace) -> JobSpec:
    """The job file with ``--set``'s fields and, with ``--hyperband``, Hyperband's brackets in
    place of its successive halving, as ``tuning.hyperband: R`` in the file would run."""
    sets = parse_assignments(args.set)
    hyperband = getattr(args, "hyperband", None)
    if hyperband is None:
        return read_job(args.job, sets)
    if hyperband == DEFAULT_R:
        hyperband = read_job(args.job, sets).require_tuning().default_hyperband
    return read_job(args.job, {**sets, **hyperband_overrides(hyperband, sets)})


def _descriptor(stream: object) -> int | None:
    try:
        return int(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # a stream with none (a test's capture)
        return None


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Everything written to stdout in the block goes to stderr: the console's text and
    what the run's functions print (file descriptor 1 too, where both streams have one)."""
    sys.stdout.flush()
    out, err = _descriptor(sys.stdout), _descriptor(sys.stderr)
    saved = os.dup(out) if out is not None and err is not None else None
    real = sys.stdout
    sys.stdout = sys.stderr
    if saved is not None:
        os.dup2(err, out)  # type: ignore[arg-type]
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stdout = real
        if saved is not None:
            os.dup2(saved, out)  # type: ignore[arg-type]
            os.close(saved)


def json_output(args: argparse.Namespace, command: Callable[[], int]) -> int:
    """Run ``command``; with ``--json``, its text on stderr and the record of the run it ran
    as JSON on stdout, nothing else there (an error prints no JSON)."""
    if not getattr(args, "json", False):
        return command()
    with stdout_to_stderr():
        code = command()
    folder = last_run_dir()
    if folder is not None:
        print_json(record_to_json(RunDir(folder).read_record()))
    return code


def print_trial_lines(run: BaseRun, out: Console) -> None:
    """Piped output: a plain line per trial result (``reports.trial_lines``)."""
    run.events.callbacks.append(TrialLines(lambda line: out.print(escape(line))))
