"""Options and helpers shared by commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import ConfigError
from faasml.types import Constraint, Objective
from faasml.units import parse_duration, parse_money


def add_catalog_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("platform")
    group.add_argument(
        "--catalog",
        default="aws-lambda",
        help="a shipped catalog (aws-lambda, local) or the path of a catalog file "
        "(default: aws-lambda)",
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


def catalog_from(args: argparse.Namespace) -> Catalog:
    catalog = load_catalog(args.catalog)
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


def console() -> Console:
    return Console(highlight=False)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")
