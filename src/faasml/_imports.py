"""Lazy import of optional dependencies with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType

from faasml.exceptions import MissingDependencyError


def optional_import(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise an error that says ``pip install 'faasml[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = module.partition(".")[0]
        raise MissingDependencyError(
            f"'{package}' is needed for this feature but is not installed; "
            f"install it with: pip install 'faasml[{extra}]'"
        ) from err
