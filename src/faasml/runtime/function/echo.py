"""A function that does nothing but return its payload: invoked to time a cold start or to
warm an instance. A leaf module, so that the instance imports nothing else for it."""

from __future__ import annotations

from typing import Any

ECHO_FN = "faasml.runtime.function.echo:echo"


def echo(payload: Any) -> Any:
    """Return the payload unchanged."""
    return payload
