"""`faasml simulate ...`: run planners and policies in simulation; one module per kind."""

from __future__ import annotations

import importlib
from typing import Any

SIMULATE_KINDS = ("faasml.cli.simulate_train",)
"""Each module has ``register(kinds)``, which adds its sub-command and sets ``func``."""


def register(commands: Any) -> None:
    simulate = commands.add_parser("simulate", help="simulate jobs with the planners and models")
    kinds = simulate.add_subparsers(
        dest="simulate_kind", metavar="KIND", parser_class=type(simulate)
    )
    kinds.required = True
    for name in SIMULATE_KINDS:
        importlib.import_module(name).register(kinds)
