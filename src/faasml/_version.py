"""The package version, in a leaf module that any layer may import."""

from __future__ import annotations

__version__ = "0.1.0"
