"""`faasml simulate ...`: run plans on a simulated platform (MISSION C10).

Each kind lives in its own module listed in SIMULATE_KINDS; each has ``register(kinds)``.
"""

from __future__ import annotations

import importlib
from typing import Any

SIMULATE_KINDS = ("faasml.cli.simulate_tune", "faasml.cli.simulate_train")
"""Modules that add a kind to `faasml simulate`, each with ``register(kinds)``."""


def register(commands: Any) -> None:
    simulate = commands.add_parser(
        "simulate", help="run a plan on a simulated platform and compare it with the prediction"
    )
    kinds = simulate.add_subparsers(
        dest="simulate_kind", metavar="KIND", parser_class=type(simulate)
    )
    kinds.required = True
    for name in SIMULATE_KINDS:
        importlib.import_module(name).register(kinds)
