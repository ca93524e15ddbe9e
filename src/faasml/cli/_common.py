"""Options and helpers shared by commands."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import ConfigError
from faasml.types import Constraint, Objective
from faasml.units import format_duration, format_money, parse_duration, parse_money


def add_catalog_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("platform")
    group.add_argument(
        "--catalog",
        default=None,
        help="a shipped catalog (aws-lambda, local) or the path of a catalog file "
        f"(default: {DEFAULT_CATALOG}; for a job file, the job's)",
    )
    group.add_argument("--arch", help="CPU architecture of the platform (aws-lambda: x86, arm)")
    group.add_argument(
        "--storages",
        help="comma-separated storage services to consider (default: all in the catalog)",
    )
    group.add_argument(
        "--memory-step",
        type=int,
        default=None,
        metavar="MB",
        help="memory grid step in MB for planning (default: 64)",
    )
    group.add_argument(
        "--max-functions",
        type=int,
        default=None,
        metavar="N",
        help="most functions per job (default: the platform's concurrency limit)",
    )


DEFAULT_CATALOG = "aws-lambda"
"""The catalog a plan of a named workload prices with unless ``--catalog`` names another."""


def catalog_from(args: argparse.Namespace, default: Catalog | None = None) -> Catalog:
    """``--catalog`` (else ``default``, else ``DEFAULT_CATALOG``) narrowed by the options."""
    if args.catalog is None and default is not None:
        catalog = default
    else:
        catalog = load_catalog(args.catalog or DEFAULT_CATALOG)
    if args.arch:
        catalog = catalog.with_architecture(args.arch)
    if args.storages:
        names = [name.strip() for name in args.storages.split(",") if name.strip()]
        if not names:
            raise ConfigError(f"the value of --storages is {args.storages!r}, but names none")
        catalog = catalog.restricted_to(names)
    for flag, value in (
        ("--memory-step", args.memory_step),
        ("--max-functions", args.max_functions),
    ):
        if value is not None and value < 1:
            raise ConfigError(f"the value of {flag} is {value}, but must be >= 1")
    return catalog


def add_constraint_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("constraint (at least one)")
    group.add_argument("--budget", metavar="$", help="most money to spend, e.g. 2.50 or $2.50")
    group.add_argument("--deadline", metavar="T", help="latest finish, e.g. 90s, 30m, 1h30m")
    group.add_argument(
        "--minimise",
        choices=("time", "cost"),
        help="with both a budget and a deadline: what to minimise (default: time)",
    )


def constraint_from(args: argparse.Namespace) -> Constraint:
    if args.budget is None and args.deadline is None:
        raise ConfigError("give --budget, --deadline or both")
    objective = None
    if args.minimise is not None:
        objective = Objective.MIN_TIME if args.minimise == "time" else Objective.MIN_COST
    return Constraint(
        budget_usd=None if args.budget is None else parse_money(args.budget, name="--budget"),
        deadline_s=None
        if args.deadline is None
        else parse_duration(args.deadline, name="--deadline"),
        objective=objective,
    )


def output_folder(value: str, flag: str = "--plot") -> Path:
    """The folder ``value`` of ``flag``, created if missing; ConfigError (one line, naming the
    value and the rule) when it cannot be: a file is in the way, a parent cannot be made, or
    it is not writable. Checked before any planning work."""
    folder = Path(value)
    rule = "must be a folder faasml can create and write into"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(
            f"the value of {flag} is {value!r}, but {rule}; it names an existing file"
        ) from None
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(f"the value of {flag} is {value!r}, but {rule} ({reason})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"the value of {flag} is {value!r}, but {rule} (not writable)")
    return folder


def check_seed(seed: int, flag: str = "--seed") -> int:
    """``seed`` when it is >= 0 (numpy's generators take no negative seed), else ConfigError."""
    if seed < 0:
        raise ConfigError(f"the value of {flag} is {seed}, but must be an integer >= 0")
    return seed


PIPE_WIDTH = 100_000
"""Width of output that is not a terminal: wider than any table faasml prints."""

LINE_WIDTH = 80
"""Piped, a run's running text (profile, plan, events, summary) folds at this width."""


def say(out: Console, text: str, *, markup: bool = False, indent: int | None = None) -> None:
    """Print a line of running text. On a terminal rich wraps it to the terminal; piped, it
    folds at word boundaries to LINE_WIDTH columns, each later line indented by ``indent``
    (default: the line's own indentation and two more), so that a CI log reads at 80
    columns. ``markup``: ``text`` carries rich markup (dropped piped, as colour is)."""
    if out.is_terminal:
        out.print(text if markup else escape(text))
        return
    plain = Text.from_markup(text).plain if markup else text
    if indent is None:
        indent = len(plain) - len(plain.lstrip(" ")) + 2
    # A number keeps its unit on its line ("332 ms", "768 MB"): the space is held while folding.
    held = _NUMBER_UNIT.sub("\x1f", plain)
    folded = textwrap.wrap(
        held,
        LINE_WIDTH,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    for line in folded or [""]:
        out.print(escape(line.replace("\x1f", " ")))


_NUMBER_UNIT = re.compile(r"(?<=\d) (?=[A-Za-z%]+\b)")


def console(*, stderr: bool = False) -> Console:
    """Where every command prints its text and tables. On a terminal: rich, as wide as the
    terminal. Piped or redirected (CI logs, ``| less``): plain text, no colour, and so wide
    that no table cell is cut or wrapped and no line is broken, whatever COLUMNS says.
    Never emoji: a ``module:factory:`` or a path is printed as written."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(highlight=False, stderr=stderr, emoji=False)
    return Console(
        highlight=False,
        stderr=stderr,
        width=PIPE_WIDTH,
        color_system=None,
        soft_wrap=False,
        emoji=False,
    )


def print_error(message: str) -> None:
    """``error: message`` on stderr as one line: never wrapped, markup in it not read, and
    line breaks inside it (a remote traceback) joined with '; '."""
    text = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    console(stderr=True).print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def add_workload_command(
    kinds: Any,
    name: str,
    *,
    help: str,
    description: str,
    workload_help: str = "a shipped workload name or the path of a profile",
) -> argparse.ArgumentParser:
    """A command ``name`` among ``kinds`` whose one positional argument is the workload."""
    parser: argparse.ArgumentParser = kinds.add_parser(name, help=help, description=description)
    parser.add_argument("workload", help=workload_help)
    return parser


def add_json_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json``: print ``what`` (e.g. 'the plan') as JSON instead of tables."""
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set FIELD=VALUE`` (repeatable): a job field overridden (``job.parse_assignments``)."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a field, e.g. --set tuning.trials=8 (repeatable)",
    )


def add_plan_options(parser: argparse.ArgumentParser) -> None:
    """The constraint options, then the catalog options (every planning command's last)."""
    add_constraint_options(parser)
    add_catalog_options(parser)


class SpaceOptions(TypedDict):
    """How finely the allocation space is searched (``allocation_space``'s keywords)."""

    memory_step_mb: int | None
    max_functions: int | None


def space_options(args: argparse.Namespace) -> SpaceOptions:
    """``--memory-step`` and ``--max-functions`` as the planners' keyword arguments."""
    return SpaceOptions(memory_step_mb=args.memory_step, max_functions=args.max_functions)


def emit(args: argparse.Namespace, record: Callable[[], Any], show: Callable[[], None]) -> int:
    """Print ``record()`` as JSON with ``--json``, else ``show()`` it; exit code 0."""
    if args.json:
        print_json(record())
    else:
        show()
    return 0


def bounds_text(constraint: Constraint) -> str:
    """'fastest within budget $2.00' or 'cheapest within deadline 30m' (both when both)."""
    parts = []
    if constraint.budget_usd is not None:
        parts.append(f"budget {format_money(constraint.budget_usd)}")
    if constraint.deadline_s is not None:
        parts.append(f"deadline {format_duration(constraint.deadline_s)}")
    goal = "fastest" if constraint.goal is Objective.MIN_TIME else "cheapest"
    return f"{goal} within {' and '.join(parts)}"
