"""faasml: ML training and tuning on serverless compute within a budget or a deadline."""

from __future__ import annotations

__version__ = "0.1.0"
