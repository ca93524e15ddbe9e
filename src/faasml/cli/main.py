"""`faasml` entry point: one sub-command module per command, errors printed without a traceback."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from faasml._version import __version__
from faasml.cli._common import print_error
from faasml.exceptions import FaasmlError
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.record.run_lock import RunInterrupted, disk_full, last_run_dir

COMMAND_MODULES: tuple[str, ...] = (
    "faasml.cli.plan",
    "faasml.cli.job",
    "faasml.cli.simulate",
    "faasml.cli.run",
    "faasml.cli.profile",
    "faasml.cli.cluster",
    "faasml.cli.report",
    "faasml.cli.dashboard",
    "faasml.cli.predict",
)
"""Each module has ``register(subparsers)``, which adds its parser and sets ``func``."""

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""As a shell reports a command a Ctrl-C stopped (128 + SIGINT)."""


def interrupted_line(err: KeyboardInterrupt) -> str:
    """One line for a Ctrl-C: what was stopped and how to go on."""
    run_dir = err.run_dir if isinstance(err, RunInterrupted) else None
    if run_dir is None or not RunDir(run_dir).record_path.exists():
        return "interrupted: stopped before anything was recorded"
    return (
        f"interrupted: the run in {run_dir} stopped, its record and checkpoints kept; resume "
        f"with faasml resume {run_dir}"
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print_error(message)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="faasml",
        description="Plan and run ML training and tuning on serverless compute "
        "within a budget or a deadline.",
    )
    parser.add_argument("--version", action="version", version=f"faasml {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except FaasmlError as err:
        print_error(str(err))
        return EXIT_USAGE
    except KeyboardInterrupt as err:
        print(interrupted_line(err), file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other command-line tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as err:
        if not disk_full(err):
            raise
        where = f"{err.filename or 'a file'} ({err.strerror})"
        print_error(f"disk full writing {where}; free some space{_resume()}")
        return 1
    return code


def _resume() -> str:
    """How to go on with the run a command ran, if it recorded one."""
    run_dir = last_run_dir()
    if run_dir is None or not RunDir(run_dir).record_path.exists():
        return ""
    return f", then resume the run with faasml resume {run_dir}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
