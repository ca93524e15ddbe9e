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

COMMAND_MODULES: tuple[str, ...] = (
    "faasml.cli.plan",
    "faasml.cli.job",
    "faasml.cli.simulate",
    "faasml.cli.run",
    "faasml.cli.profile",
    "faasml.cli.cluster",
)
"""Each module has ``register(subparsers)``, which adds its parser and sets ``func``."""

EXIT_USAGE = 2


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
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other command-line tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
